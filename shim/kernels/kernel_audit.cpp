// tmaguard shim: the device audit's plan for a kernel, made with its facts (kernel_table.cpp): which places of its
// parameters may hold device addresses, and how many of its launches are audited (launch/device_audit.cpp reads
// them back; kernel_audit.h says what the plan holds).
#include <algorithm>

#include "kernels/kernel_table.h"
#include "runtime/runtime.h"
#include "core/struct_search.h"

namespace tmaguard {

void plan_audit(KernelInfo& k, const KernelInfo* stale) {
  for (const MapPlace& p : pointer_places(k.layout)) {
    const bool in_map = std::any_of(k.maps.begin(), k.maps.end(), [&](const MapPlace& m) {
      return m.param == p.param && p.offset + 8 > m.offset && p.offset < m.offset + kTensorMapBytes;
    });
    if (in_map) continue;
    PointerWords* last = k.audit.pointers.empty() ? nullptr : &k.audit.pointers.back();
    if (last && last->param == p.param && last->offset + 8 * last->words == p.offset)
      ++last->words;
    else
      k.audit.pointers.push_back({p.param, p.offset, 1});
  }
  k.audit.pointers.shrink_to_fit();
  if (!k.audit.pointers.empty())
    k.audit.launches_left.store(
        stale ? stale->audit.launches_left.load(std::memory_order_relaxed) : config().device_audit,
        std::memory_order_relaxed);
}

}  // namespace tmaguard
