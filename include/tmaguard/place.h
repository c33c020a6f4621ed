// tmaguard: where a tensor map sits. One value type from the kernel cache through decoding, rules, findings, inspect
// and census records to the report tool, spelled in one place.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace tmaguard {

//! Where a tensor map sits:
//!   Space::kParam   in a launch's parameters: a whole 128-byte parameter (offset 0) or a 128-byte window `offset`
//!                   bytes into a larger one (a CUTLASS Params struct)
//!   Space::kDevice  in device memory a parameter points to: the pointer is parameter `param` (a whole 8-byte
//!                   parameter, offset 0) or the 8-byte word `offset` bytes into a larger one; the map sits `at` bytes
//!                   past the address it holds (read back after the kernel ran: device_audit)
//! A new space adds its enumerator here, its spelling in to_string() and its JSON fields in records.cpp
//! (docs/extending.md).
struct MapPlace {
  enum class Space : uint8_t { kParam, kDevice };
  uint32_t param = 0;   // the kernel parameter's index
  uint32_t offset = 0;  // bytes into that parameter
  Space space = Space::kParam;
  uint32_t at = 0;  // kDevice: bytes past the address the pointer holds

  //! A map in memory a parameter points to, `at` bytes past the address in parameter `param` (+ `offset`).
  static MapPlace device(uint32_t param, uint32_t offset, uint32_t at) {
    MapPlace p{param, offset};
    p.space = Space::kDevice;
    p.at = at;
    return p;
  }
  bool on_device() const { return space == Space::kDevice; }

  friend bool operator==(const MapPlace& a, const MapPlace& b) {
    return a.space == b.space && a.param == b.param && a.offset == b.offset && a.at == b.at;
  }
  friend bool operator!=(const MapPlace& a, const MapPlace& b) { return !(a == b); }
  //! Parameter order, then offset order: the order of a launch's maps (rules' map order counts in it).
  friend bool operator<(const MapPlace& a, const MapPlace& b) {
    return std::tie(a.space, a.param, a.offset, a.at) < std::tie(b.space, b.param, b.offset, b.at);
  }
  //! Whether 128-byte maps at the two places would share bytes.
  bool overlaps(const MapPlace& o, uint32_t map_bytes = 128) const {
    if (space != o.space || param != o.param) return false;
    if (on_device()) return offset == o.offset && at < o.at + map_bytes && o.at < at + map_bytes;
    return offset < o.offset + map_bytes && o.offset < offset + map_bytes;
  }
};

//! "3" for a whole parameter, "0+1152" for a map inside one, "5->256" for a map 256 bytes past the address parameter
//! 5 holds ("0+64->128" for a pointer inside a parameter): how rules name a place (after "param:") and how every
//! record and message spells it ("param 0+1152", "param=5->256").
inline std::string to_string(const MapPlace& p) {
  std::string s = p.offset ? std::to_string(p.param) + "+" + std::to_string(p.offset) : std::to_string(p.param);
  if (p.on_device()) s += "->" + std::to_string(p.at);
  return s;
}

}  // namespace tmaguard
