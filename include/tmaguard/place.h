// tmaguard: where a tensor map sits. One value type from the kernel cache through decoding, rules, findings, inspect
// and census records to the report tool, spelled in one place.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace tmaguard {

//! Where a tensor map sits. Every map tmaguard reads today is in a launch's parameters (`Space::kParam`): a whole
//! 128-byte parameter (offset 0) or a 128-byte window `offset` bytes into a larger one (a CUTLASS Params struct).
//! `space` is the room for maps that live elsewhere (memory a parameter points to); a new space adds its enumerator
//! here, its spelling in to_string() and its JSON fields in report.cpp (docs/extending.md).
struct MapPlace {
  enum class Space : uint8_t { kParam };
  uint32_t param = 0;   // the kernel parameter's index
  uint32_t offset = 0;  // bytes into that parameter
  Space space = Space::kParam;

  friend bool operator==(const MapPlace& a, const MapPlace& b) {
    return a.space == b.space && a.param == b.param && a.offset == b.offset;
  }
  friend bool operator!=(const MapPlace& a, const MapPlace& b) { return !(a == b); }
  //! Parameter order, then offset order: the order of a launch's maps (rules' map order counts in it).
  friend bool operator<(const MapPlace& a, const MapPlace& b) {
    return std::tie(a.space, a.param, a.offset) < std::tie(b.space, b.param, b.offset);
  }
  //! Whether 128-byte maps at the two places would share bytes.
  bool overlaps(const MapPlace& o, uint32_t map_bytes = 128) const {
    return space == o.space && param == o.param && offset < o.offset + map_bytes && o.offset < offset + map_bytes;
  }
};

//! "3" for a whole parameter, "0+1152" for a map inside one: how rules name a place (after "param:") and how every
//! record and message spells it ("param 0+1152", "param=0+1152").
inline std::string to_string(const MapPlace& p) {
  return p.offset ? std::to_string(p.param) + "+" + std::to_string(p.offset) : std::to_string(p.param);
}

}  // namespace tmaguard
