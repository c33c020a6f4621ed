// tmaguard core: a clean launch compiled into what its judgement asks of its maps' addresses (judge.h: MovedMaps).
//
// Why the answer carries over: the maps of the new launch equal the compiled ones in every byte but 0..7, so each
// decodes to the same view with another address (every form keeps the address there, and no other field reads it)
// as long as the address is one no decode convention refuses; every rule entry and generic check that does not read
// an address answers as it did; whether each rule applies does not change (its `when` reads no address). What is
// left is asked again: the address entries of the rules that apply, and the generic NULL and alignment checks.
#include <cstring>
#include <type_traits>

#include "rules_model.h"
#include "tmaguard/judge.h"

namespace tmaguard {
namespace {

// read_map takes a map in CuTe DSL's or tensormap.replace's form at a user-space address only (below 2^57)
constexpr uint64_t kAddressLimit = 1ULL << 57;

static_assert(std::is_trivially_copyable_v<TensorMapView>, "clean_at copies views with memcpy");

}  // namespace

std::unique_ptr<const MovedMaps> MovedMaps::compile(const RuleSet& rules, const std::vector<int>& which,
                                                    const std::vector<TensorMapParam>& maps) {
  if (maps.empty() || maps.size() > kMaxMaps) return nullptr;
  std::unique_ptr<MovedMaps> m(new MovedMaps);
  for (const TensorMapParam& p : maps) {
    if (!p.decoded.ok()) return nullptr;
    const TensorMapView& v = p.decoded.view;
    m->views_.push_back(judged_view(v));
    m->shift_.push_back(m->views_.back().address - v.address);
    m->was_.push_back(v.address);
    m->interleave_.push_back(static_cast<uint8_t>(v.interleave));
    m->template_.push_back(unjudged_template(p));
  }
  std::vector<AddressAsk> asks;
  if (!address_asks(rules, which, maps, asks)) return nullptr;
  for (const AddressAsk& a : asks) m->asks_.push_back({a.check, static_cast<uint32_t>(a.a), a.b});
  if (!m->clean_at(m->was_.data())) return nullptr;  // not clean where it was compiled: nothing to carry over
  return m;
}

bool MovedMaps::clean_at(const uint64_t* addresses) const {
  const std::size_t n = views_.size();
  for (std::size_t i = 0; i < n; ++i) {
    const uint64_t a = addresses[i];
    if (template_[i]) {
      if (a != was_[i]) return false;
      continue;
    }
    if (a == 0 || a >= kAddressLimit || address_problem(a, interleave_[i])) return false;
  }
  if (asks_.empty()) return true;
  alignas(TensorMapView) unsigned char buf[kMaxMaps * sizeof(TensorMapView)];
  auto* views = reinterpret_cast<TensorMapView*>(buf);
  std::memcpy(buf, views_.data(), n * sizeof(TensorMapView));
  for (std::size_t i = 0; i < n; ++i) views[i].address = addresses[i] + shift_[i];
  for (const Ask& q : asks_)
    if (q.check->kind->evaluate(*q.check, views[q.a], q.b < 0 ? nullptr : &views[q.b])) return false;
  return true;
}

}  // namespace tmaguard
