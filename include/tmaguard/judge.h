// tmaguard: everything tmaguard says about one launch. Pure: kernel name and decoded maps in, findings out.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tmaguard/descriptor_checks.h"
#include "tmaguard/finding.h"
#include "tmaguard/launch.h"
#include "tmaguard/rules.h"

namespace tmaguard {

struct Check;  // an entry of a rule (rules_model.h)

//! What tmaguard says about one launch.
struct Judgement {
  std::vector<Finding> findings;
  std::vector<NotCheckable> not_checkable;  // rules that recognise the launch but cannot check it
};

//! The kernel's own rules (`which`, from rules_for_kernel), then the generic descriptor check of every map, with
//! the architecture policy of descriptor_checks.h for the GPU the launch runs on. `known_clean`, when given, marks
//! maps whose bytes already passed the generic check (it depends on the bytes alone): they are not checked again.
Judgement judge_launch(const RuleSet& rules, const std::vector<int>& which, std::string_view kernel,
                       const std::vector<TensorMapParam>& maps, const Arch& arch,
                       const std::vector<bool>* known_clean = nullptr);

//! A launch judge_launch found nothing in (no finding, nothing not checkable), compiled into what its judgement asks of
//! its maps' global addresses (bytes 0..7 of each): the generic checks' NULL and alignment, the entries of the rules
//! that apply which read addresses (CheckKind::address_free). A training loop's maps move every step; their layouts do
//! not: a later launch of the kernel whose maps equal these in everything but their addresses is judged by clean_at,
//! without decoding a map or evaluating the rest of the rules again.
class MovedMaps {
 public:
  static constexpr std::size_t kMaxMaps = 32;
  //! `maps`: a launch judge_launch found nothing in (the caller judged it). nullptr when it cannot be compiled: a map
  //! that is no tensor map, more than kMaxMaps maps, a rule whose `when` reads addresses (whether it applies would hang
  //! on them), something a rule says before its checks, or addresses that are not clean after all.
  static std::unique_ptr<const MovedMaps> compile(const RuleSet& rules, const std::vector<int>& which,
                                                  const std::vector<TensorMapParam>& maps);
  //! `addresses`: each map's global address on the new launch, in the compiled launch's map order. True when
  //! judge_launch would find nothing in it; false when it might (then judge it in full). Besides the judgement's own
  //! questions, an address must be one every map form decodes alike (non-NULL, below 2^57, 16-byte aligned), and a
  //! template map's must not have changed.
  bool clean_at(const uint64_t* addresses) const;
  std::size_t size() const { return views_.size(); }

 private:
  struct Ask {
    const Check* check;
    uint32_t a;
    int32_t b;  // -1: a single-map kind
  };
  std::vector<TensorMapView> views_;  // each map's view as its checks judge it (judged_view)
  std::vector<uint64_t> shift_;       // judged address less the map's own (a ragged map's), mod 2^64
  std::vector<uint64_t> was_;         // each map's address at compile
  std::vector<uint8_t> interleave_;   // each map's interleave (the driver's alignment rule: address_problem)
  std::vector<bool> template_;        // a template map inside a structure: its address must stay put
  std::vector<Ask> asks_;
};

//! True when any finding is error-severity (a launch with none is remembered as clean).
bool has_errors(const std::vector<Finding>& findings);

}  // namespace tmaguard
