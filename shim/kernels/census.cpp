// tmaguard shim: inspect mode's census (census.h): counted by every inspected launch, written at exit.
#include "kernels/census.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "thread/thread_words.h"
#include "kernels/kernel_table.h"
#include "report/reporter.h"
#include "tmaguard/config.h"
#include "tmaguard/records.h"

namespace tmaguard {
namespace {

void census_of(const KernelInfo& k) {
  CensusRecord r;
  r.kernel = k.name;
  r.launches = k.census.launches.load(std::memory_order_relaxed);
  if (r.launches == 0) return;
  r.params = static_cast<int>(k.layout.sizes.size());
  r.maps_in_params = k.census.maps_in_params.load(std::memory_order_relaxed);
  r.maps_in_structs = k.census.maps_in_structs.load(std::memory_order_relaxed);
  r.template_maps = k.census.template_maps.load(std::memory_order_relaxed);
  r.maps_in_device_memory = k.audit.most_maps.load(std::memory_order_relaxed);
  for (std::size_t p = 0; p < k.layout.sizes.size(); ++p) {
    if (k.layout.sizes[p] <= kTensorMapBytes) continue;
    const int n = static_cast<int>(
        std::count_if(k.maps.begin(), k.maps.end(), [&](const MapPlace& s) { return s.param == p; }));
    r.large_params.push_back({static_cast<int>(p), k.layout.sizes[p], n});
  }
  report_census(r);
}

// At exit, in inspect mode: one census record per kernel launched.
void report_census_at_exit() {
  if (armed_already() && mode() == Mode::kInspect) for_each_kernel(census_of);
}

}  // namespace

void census_count_launch(const KernelInfo& k) {
  // Registered on the first inspected launch, after the exit summary was registered at initialisation, so that it
  // runs before the summary (atexit runs in reverse).
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(report_census_at_exit); });
  k.census.launches.fetch_add(1, std::memory_order_relaxed);
}

void census_note_maps(const KernelInfo& k, const std::vector<TensorMapParam>& maps) {
  int whole = 0, inner = 0, templates = 0;
  for (const TensorMapParam& m : maps) {
    if (!m.decoded.ok()) continue;
    if (!m.embedded) ++whole;
    else ++inner;
    if (unjudged_template(m)) ++templates;
  }
  k.census.maps_in_params.store(whole, std::memory_order_relaxed);
  k.census.maps_in_structs.store(inner, std::memory_order_relaxed);
  k.census.template_maps.store(templates, std::memory_order_relaxed);
}

}  // namespace tmaguard
