// tmaguard core: reading a launch's arguments (the `extra` form).
#include "tmaguard/launch.h"

#include <cstdint>

namespace tmaguard {

LaunchArgs parse_extra(void* const* extra, int max_pairs) {
  // CU_LAUNCH_PARAM_END is ((void*)0x00), BUFFER_POINTER 0x01, BUFFER_SIZE 0x02 (cuda.h); spelled here so the pure
  // core needs no CUDA header.
  const auto end = reinterpret_cast<void*>(0x00), pointer = reinterpret_cast<void*>(0x01),
             size = reinterpret_cast<void*>(0x02);
  LaunchArgs a;
  for (int i = 0; extra && i < 2 * max_pairs && extra[i] != end; i += 2) {
    if (extra[i] == pointer) {
      a.buffer = static_cast<const uint8_t*>(extra[i + 1]);
    } else if (extra[i] == size && extra[i + 1]) {
      a.buffer_size = *static_cast<const std::size_t*>(extra[i + 1]);
      a.size_declared = true;
    }
  }
  return a;
}

}  // namespace tmaguard
