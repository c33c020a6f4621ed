// tmaguard shim: one launch, checked in three steps.
//
//   collect: the kernel's facts (the memo's entry, from the kernel table), each tensor map's 128 bytes for this
//            launch and its content hash, and the launch key; a key the memo knows clean ends the check here
//   judge:   decode every map, run the kernel's rules and the generic descriptor checks (pure core: judge.h)
//   report:  provenance of the maps findings name, then the reporter applies the mode (run, reject, abort); what was
//            found clean goes to the memo
#include "launch/full_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "process/counters.h"
#include "process/hash_key.h"
#include "callsite/capture.h"
#include "driver/allocations.h"
#include "driver/device_arch.h"
#include "runtime/intercept.h"
#include "kernels/census.h"
#include "launch/declared.h"
#include "launch/device_audit.h"
#include "kernels/kernel_table.h"
#include "memo/memo.h"
#include "driver/provenance.h"
#include "report/reporter.h"
#include "runtime/runtime.h"
#include "core/launch_key.h"
#include "tmaguard/judge.h"
#include "tmaguard/tensor_match.h"
#include "tmaguard/records.h"

namespace tmaguard {
namespace {

// A launch's value per map slot: inline for the usual few maps (a launch whose maps only moved allocates nothing),
// on the heap past kInline.
template <typename T>
class PerMap {
 public:
  void resize(std::size_t n) {
    n_ = n;
    if (n > kInline) heap_.resize(n);
  }
  std::size_t size() const { return n_; }
  T* data() { return n_ > kInline ? heap_.data() : inline_; }
  const T* data() const { return n_ > kInline ? heap_.data() : inline_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }

 private:
  static constexpr std::size_t kInline = 16;
  T inline_[kInline];
  std::vector<T> heap_;
  std::size_t n_ = 0;
};

// One map's bytes as this launch's check read them.
struct alignas(16) MapCopy {
  uint8_t b[kTensorMapBytes];
};

struct Collected {
  MemoEntry* entry = nullptr;
  const KernelInfo* kernel = nullptr;
  PerMap<MapCopy> copies;        // each map slot's 128 bytes, read once from the caller's memory
  PerMap<const uint8_t*> bytes;  // each slot's copy (nullptr: not in the launch), what every step below reads
  PerMap<uint64_t> hashes;       // and their content hashes
  uint64_t key = 0;
};

// How the provenance table knows these bytes (provenance.h), as a sentence.
std::string provenance_of(const uint8_t* bytes) { return provenance_for(provenance_hash(bytes)); }

// Inspect mode: one record per (kernel, layout); the layout ignores addresses so re-allocations do not repeat it.
// `slots`: each map's slot in the kernel's map order (its bytes in `c`).
void inspect(const KernelInfo* k, const Geometry& g, const std::vector<TensorMapParam>& maps,
             const std::vector<std::size_t>& slots, const Collected& c) {
  const uint64_t layout = layout_key(k->name, maps);
  InspectRecord r;
  r.kernel = k->name;
  r.grid = {g.gx, g.gy, g.gz};
  r.block = {g.bx, g.by, g.bz};
  for (std::size_t i = 0; i < k->layout.offsets.size(); ++i)
    r.params.emplace_back(k->layout.offsets[i], k->layout.sizes[i]);
  for (std::size_t i = 0; i < maps.size(); ++i)
    r.maps.push_back({static_cast<int>(i), maps[i].place, maps[i].embedded, maps[i].decoded,
                      maps[i].decoded.ok() ? provenance_of(c.bytes[slots[i]]) : std::string()});
  report_inspect("inspect|" + std::to_string(layout), r);
  census_note_maps(*k, maps);
}

// False when the launch cannot be judged (no maps, or the caller did not provide their bytes).
bool collect(const LaunchView& launch, Collected& c) {
  const LaunchArgs args = launch.args();
  const bool readable = args.readable();
  // The kernel's facts in force for these bytes: a first launch searches its structs with them, a later one searches
  // again when it must (memo.h: entry).
  c.entry = &entry(launch.f, readable ? &args : nullptr, declared_seed());
  c.kernel = c.entry->info;
  const KernelInfo& k = *c.kernel;
  if (k.params_truncated)
    report_notice(Notice::kParamsTruncated, k.name,
                  "kernel " + k.name + " has more parameters than tmaguard reads; the rest were not checked");
  if (k.maps.empty()) return false;
  if (!args.kernel_params && !args.buffer) return false;  // the driver will refuse this launch itself
  if (!readable) {
    report_notice(Notice::kExtraWithoutSize, "",
                  "a launch passed its parameters with CU_LAUNCH_PARAM_BUFFER_POINTER but no "
                  "CU_LAUNCH_PARAM_BUFFER_SIZE: tmaguard reads only what the caller declares, so such launches are not "
                  "checked");
    return false;
  }
  // One snapshot of the caller's bytes: the key, the judgement and the memo's copy all come from it, so that a thread
  // rewriting a map meanwhile can never have bytes nobody judged remembered as clean.
  const std::size_t n = k.maps.size();
  c.copies.resize(n);
  c.bytes.resize(n);
  c.hashes.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* at = args.map(k.layout, k.maps[i]);
    c.bytes[i] = at ? static_cast<const uint8_t*>(std::memcpy(c.copies[i].b, at, kTensorMapBytes)) : nullptr;
    if (!at && args.buffer) {  // tmaguard never reads past what the caller declares
      const std::size_t end = k.layout.offsets[k.maps[i].param] + k.maps[i].offset + kTensorMapBytes;
      report_notice(Notice::kExtraShortBuffer, k.name,
                    "a launch of kernel " + k.name + " passed its parameters with CU_LAUNCH_PARAM_BUFFER_SIZE = " +
                        std::to_string(args.buffer_size) + " bytes, which ends before its tensor map at bytes " +
                        std::to_string(end - kTensorMapBytes) + ".." + std::to_string(end) +
                        ": such launches are not checked (declare the whole parameter block)");
      count_unchecked(Unchecked::kShortBuffer);
      return false;
    }
  }
  return launch_key(
      c.entry->identity, g_hash_key, n, [&](std::size_t i) { return c.bytes[i]; }, &c.key, c.hashes.data());
}

// Map slot i of the launch, decoded as its place demands (KernelInfo::evidence).
TensorMapParam map_param(const Collected& c, std::size_t i) {
  const KernelInfo& k = *c.kernel;
  TensorMapParam m;
  m.place = k.maps[i];
  m.embedded = k.embedded(k.maps[i]);
  m.named_only = k.named_only[i];
  m.decoded = read_map(c.bytes[i], k.evidence(i));
  return m;
}

// The maps this launch must judge, decoded as their places demand (KernelInfo::evidence). A kernel without rules
// needs only the maps whose bytes have not passed the generic check before; with rules (or in inspect mode) every
// map is decoded and `known_clean` marks the ones the generic check may skip. `slots` receives each one's slot.
std::vector<TensorMapParam> decode_needed(const Collected& c, bool all, std::vector<std::size_t>& slots,
                                          std::vector<bool>& known_clean) {
  std::vector<TensorMapParam> maps;
  maps.reserve(c.bytes.size());
  slots.reserve(c.bytes.size());
  for (std::size_t i = 0; i < c.bytes.size(); ++i) {
    const bool clean = map_passed_before(c.hashes[i], c.kernel->evidence(i));
    if (clean && !all) continue;
    maps.push_back(map_param(c, i));
    slots.push_back(i);
    known_clean.push_back(clean);
  }
  return maps;
}

// Every map of the launch in slot order: those decoded for it, and those a kernel without rules skipped because their
// bytes passed before (decoded now: a compile needs each map's view).
std::vector<TensorMapParam> every_map(const Collected& c, const std::vector<TensorMapParam>& maps,
                                      const std::vector<std::size_t>& slots) {
  if (maps.size() == c.bytes.size()) return maps;
  std::vector<TensorMapParam> all;
  all.reserve(c.bytes.size());
  for (std::size_t i = 0, j = 0; i < c.bytes.size(); ++i) {
    if (j < slots.size() && slots[j] == i)
      all.push_back(maps[j++]);
    else
      all.push_back(map_param(c, i));
  }
  return all;
}

// A launch judged in full with nothing said: what later launches of its layout whose maps only moved are judged
// against (memo.h: learn_moved_maps).
void learn_layout(const Collected& c, const std::vector<TensorMapParam>& maps, const std::vector<std::size_t>& slots,
                  uint64_t layout) {
  learn_moved_maps(*c.kernel, layout,
                   [&] { return MovedMaps::compile(rules(), c.kernel->rules, every_map(c, maps, slots)); });
}

// learn_layout on a launch already judged clean: without memory for the compile it stays uncompiled, and the launch
// runs (a shortcut that could not be made never refuses a clean launch).
void learn_layout_if_memory(const Collected& c, const std::vector<TensorMapParam>& maps,
                            const std::vector<std::size_t>& slots, uint64_t layout) {
  try {
    learn_layout(c, maps, slots, layout);
  } catch (const std::bad_alloc&) {
  }
}

}  // namespace

void attach_call_site(std::vector<Finding>& findings) {
  const StackMode mode = config().stack;
  if (mode == StackMode::kOff || !findings_unreported(findings)) return;
  const auto site = std::make_shared<const CallSite>(capture_call_site(mode));
  for (Finding& f : findings) f.call_site = site;
}

namespace {

// The large-tensor-flag hazard is the driver's when the tensor's allocation is under 128 KiB: the finding names the
// allocation under the map, as far as the driver says.
void name_allocation(Finding& f, const TensorMapParam& m) {
  static const std::string kHazard = finding_id(FindingId::kTmapLargeFlagSmallTensor);
  if (f.rule != kHazard || !m.decoded.ok()) return;
  Range r;
  switch (allocation_of(m.decoded.view.address, &r)) {
    case Allocation::kFound:
      f.observed += fmt::format("; its allocation [0x{:x}, 0x{:x}) holds {} bytes", r.start, r.end, r.end - r.start);
      break;
    case Allocation::kNotAllocated: f.observed += "; its address is not memory the driver allocated"; break;
    case Allocation::kUnknown: break;
  }
}

Verdict report(const Collected& c, const std::vector<TensorMapParam>& maps, const std::vector<std::size_t>& slots,
               const std::vector<bool>& known_clean, Judgement& j, uint64_t layout) {
  for (const NotCheckable& n : j.not_checkable) report_not_checkable(n.reason, n.message);
  std::vector<Finding>& findings = j.findings;
  std::vector<bool> named(maps.size(), false);  // maps a finding names
  for (Finding& fd : findings)
    for (std::size_t i = 0; i < maps.size(); ++i)
      if (fd.place == maps[i].place) {
        fd.provenance = provenance_of(c.bytes[slots[i]]);
        name_allocation(fd, maps[i]);
        named[i] = true;
      }
  // A map the generic check found nothing in is remembered by its bytes (a finding may be about the kernel as a
  // whole, without a place: that says nothing against any one map).
  for (std::size_t i = 0; i < maps.size(); ++i)
    if (!named[i] && !known_clean[i] && maps[i].decoded.ok())
      remember_map(c.hashes[slots[i]], c.kernel->evidence(slots[i]));
  // Launches a rule could not check are not remembered as clean: each one is counted in the summary. (They are
  // FA4 backward kernels of milliseconds; judging their maps again costs microseconds.)
  // Nor are launches a rule knew but could not judge (launch_unchecked): each one is counted, and said once.
  const bool judged = j.not_checkable.empty() && !launch_unchecked(findings);
  if (judged) bump(this_thread_words().launches_checked);
  if (!has_errors(findings) && judged) remember(*c.entry, c.key, c.bytes.data(), true);
  if (findings.empty()) {
    if (layout && j.not_checkable.empty()) learn_layout_if_memory(c, maps, slots, layout);
    return Verdict::kRun;
  }
  attach_call_site(findings);
  return report_findings(findings);
}

// Every decoded map against the tensors the launching thread declared; the maps the rules name as stored also for
// what their stores spill.
void judge_declared(std::string_view kernel, const std::vector<int>& which, const std::vector<TensorMapParam>& maps,
                    const DeclaredSet& declared, std::vector<Finding>& out) {
  const std::vector<bool> stored = stored_maps(rules(), which, maps);
  count_compared_with_tensors(maps_into_tensors(maps, declared.tensors, declared.count));
  for (std::size_t i = 0; i < maps.size(); ++i)
    if (auto f = tensor_finding(kernel, maps[i], declared.tensors, declared.count, stored[i]))
      out.push_back(std::move(*f));
}

Verdict check_launch_unguarded(const LaunchView& launch, Collected& c) {
  LaunchThread& t = this_thread_words();
  register_thread();
  bump(t.launches_seen);
  const bool inspecting = mode() == Mode::kInspect;
  const bool collected = collect(launch, c);
  if (inspecting) census_count_launch(*c.kernel);
  if (!collected) {
    if (inspecting && c.kernel->maps.empty()) inspect(c.kernel, launch.geom, {}, {}, c);
    return Verdict::kRun;
  }
  if (!inspecting && is_clean_key(*c.entry, c.key)) {
    bump(t.launches_checked);
    remember(*c.entry, c.key, c.bytes.data(), false);
    return Verdict::kRun;
  }
  const DeclaredSet declared = declared_tensors();  // every map is compared with them, passed before or not
  // Declared tensors and inspect mode look at every address: such launches are always judged in full.
  const uint64_t layout =
      !inspecting && declared.empty() ? moved_layout_key(*c.entry, c.bytes.size(), c.bytes.data()) : 0;
  if (layout && moved_maps_clean(*c.kernel, layout, c.bytes.size(), c.bytes.data())) {
    bump(t.launches_checked);
    bump(t.launches_moved);
    remember(*c.entry, c.key, c.bytes.data(), true);
    return Verdict::kRun;
  }
  std::vector<std::size_t> slots;
  std::vector<bool> known_clean;
  const std::vector<TensorMapParam> maps =
      decode_needed(c, inspecting || !c.kernel->rules.empty() || !declared.empty(), slots, known_clean);
  bump(t.maps_decoded, static_cast<uint64_t>(std::count_if(maps.begin(), maps.end(),
                                                           [](const TensorMapParam& m) { return m.decoded.ok(); })));
  if (inspecting) inspect(c.kernel, launch.geom, maps, slots, c);
  Judgement j = judge_launch(rules(), c.kernel->rules, c.kernel->name, maps, current_arch(), &known_clean);
  if (!declared.empty()) judge_declared(c.kernel->name, c.kernel->rules, maps, declared, j.findings);
  return report(c, maps, slots, known_clean, j, layout);
}

}  // namespace

namespace {

thread_local const void* t_nested_f __attribute__((tls_model("initial-exec"))) = nullptr;

// The launches this thread made inside another tmaguard call, said once the outer call ended (runtime.h): which
// kernel, how many; once per kernel (the summary counts them all).
void report_nested() {
  const uint32_t n = this_thread_words().nested_unreported;
  const void* f = t_nested_f;
  if (!n || !f) return;
  try {
    // Through this thread's memo, so that the facts stay alive while they are read (kernel_table.h).
    register_thread();
    const std::string name = entry(static_cast<CUfunction>(const_cast<void*>(f)), nullptr, declared_seed()).info->name;
    report_notice(Notice::kNestedLaunch, name,
                  std::to_string(n) + " launch(es) of kernel " + name +
                      " ran unchecked: they were made while their thread was inside another tmaguard call (a signal "
                      "handler that launches kernels?), where no lock may be taken; counted in the summary");
  } catch (...) {
  }
}

// A launch tmaguard could not check for want of memory or because of its own error: counted, said once per reason
// (best effort: saying it may need the memory that was missing), and the guard stays on. Without memory, abort and
// reject mode refuse the launch they could not check; an internal error lets it run (it is tmaguard's, not the job's).
std::atomic<bool> g_said[static_cast<int>(Unchecked::kCount)];
std::atomic<bool> g_unsaid{false};  // a reason whose notice could not be written yet (said after the next check)

bool refuses_unchecked(Unchecked why) {
  const Mode m = mode();
  return why == Unchecked::kNoMemory && (m == Mode::kAbort || m == Mode::kReject);
}

void say_not_checked(Unchecked why, const std::string& what) {
  if (g_said[static_cast<int>(why)].exchange(true)) return;
  try {
    report_notice(Notice::kNotChecked, to_string(why),
                  std::string("a launch was not checked: ") + to_string(why) + (what.empty() ? "" : " (" + what + ")") +
                      (refuses_unchecked(why) ? "; it was refused with CUDA_ERROR_OUT_OF_MEMORY (" +
                                                    std::string(to_string(mode())) +
                                                    " mode runs nothing it could not check)"
                                              : "; it ran") +
                      ". tmaguard stays on; the summary counts every such launch");
  } catch (...) {
    g_said[static_cast<int>(why)].store(false);
    g_unsaid.store(true, std::memory_order_relaxed);
  }
}

// After a launch was checked: what could not be said while memory was short is said now.
void say_unsaid() {
  if (!g_unsaid.load(std::memory_order_relaxed) || !g_unsaid.exchange(false)) return;
  for (int i = 0; i < static_cast<int>(Unchecked::kCount); ++i)
    if (unchecked_count(static_cast<Unchecked>(i)) && !g_said[i].load()) say_not_checked(static_cast<Unchecked>(i), "");
}

Verdict not_checked(Unchecked why, const char* what) {
  count_unchecked(why);
  say_not_checked(why, what);
  return refuses_unchecked(why) ? Verdict::kNoMemory : Verdict::kRun;
}

}  // namespace

Verdict check_launch(const Intercepted& call, const LaunchView& launch, const KernelInfo** kernel) {
  if (kernel) *kernel = nullptr;
  if (call.nested()) {
    // Inside another tmaguard call of this thread (a signal handler): nothing that takes a lock or allocates may run
    // here. Counted (one atomic add), said when the outer call ends.
    if (armed_already()) {
      count_unchecked(Unchecked::kNested);
      ++this_thread_words().nested_unreported;
      t_nested_f = launch.f;
      static std::atomic<bool> hooked{false};
      if (!hooked.load(std::memory_order_relaxed) && !hooked.exchange(true)) on_nested_launches(report_nested);
    }
    return Verdict::kRun;
  }
  if (!call.active()) return Verdict::kRun;
  try {
    Collected c;
    const Verdict v = check_launch_unguarded(launch, c);
    say_unsaid();
    if (c.entry && c.kernel) {
      if (kernel) *kernel = c.kernel;
      // The device audit is done with this kernel: this thread's launches of it take the fast paths again.
      if (c.entry->at == MapsAt::kAuditing && audit_ending(*c.kernel)) audit_done(*c.entry);
    }
    return v;
  } catch (const std::bad_alloc&) {
    return not_checked(Unchecked::kNoMemory, "");
  } catch (const std::exception& e) {
    return not_checked(Unchecked::kInternalError, e.what());
  } catch (...) {
    return not_checked(Unchecked::kInternalError, "");
  }
}

}  // namespace tmaguard
