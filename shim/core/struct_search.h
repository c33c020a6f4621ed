// tmaguard core, internal (not installed): the search of a launch's larger parameters for tensor maps, the places it
// watches, and the places that may hold device addresses. The launch path (shim/launch) and the core's own
// launch.cpp use it; a consumer of the core does not.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reserved_words.h"
#include "tmaguard/launch.h"

namespace tmaguard {

//! What a search of a launch's parameters over 128 bytes found: the plausible maps, the places that hold no map now
//! but could later (watched: all 128 bytes 0, an unfilled CUtensorMap member; a place holding other data is data,
//! whatever its word 13), and whether some places could not be read (a NULL parameter pointer, a buffer shorter than
//! the parameters): then the search is incomplete.
//! Places are watched only in a parameter whose size is a multiple of 64: a structure with a CUtensorMap member is
//! at least 64-byte aligned, so its size is a multiple of 64 (PyTorch's foreach kernels pass 3 KiB lists of pointers
//! and sizes, 8-byte aligned and rewritten on every launch, that must not cost a look per place per launch).
struct StructSearch {
  std::vector<MapPlace> maps;   // in parameter order and, inside a parameter, offset order
  std::vector<MapPlace> watch;  // at most watch_limit, in the same order
  bool incomplete = false;      // some places were not readable
  bool watch_truncated = false; // more empty places than watch_limit
  std::size_t watch_limit = 0;  // how many places one kernel's search watches at most
};
//! The alignment of every structure that can hold a CUtensorMap member (alignas(64) in CUDA 12, 128 in CUDA 13).
inline constexpr std::size_t kMapStructAlignment = 64;
//! The byte offset of word 13 (boxDim[0] - 1 in its top byte): never 0 in a tensor map, whose inner box spans at
//! least 16 bytes.
inline constexpr std::size_t kWord13Offset = 52;
//! `watched_before`: the places an earlier search of the kernel watched; one that holds other data now stays watched
//! (a map may still appear there) unless a map found now overlaps it.
StructSearch search_structs(const ParamLayout& layout, const LaunchArgs& args,
                            const std::vector<MapPlace>& watched_before = {});

//! True when a place's 128 bytes are all 0: a CUtensorMap member not filled in yet, the only kind of place a search
//! watches. Other data there, even with word 13 0, is another member's: watching it would cost a load on every
//! launch of a structure dense with fields (a CUTLASS Params), for a map that only a union could put there.
//! Asked once per search, never on the launch path.
inline bool unfilled_place(const uint8_t* b) {
  return std::all_of(b, b + kTensorMapBytes, [](uint8_t x) { return x == 0; });
}

//! True when a watched place still cannot hold a map (its word 13 is 0), for this launch's bytes; false when it now
//! could, or when its bytes are not available.
inline bool still_empty(const ParamLayout& layout, const MapPlace& place, const LaunchArgs& args) {
  const uint8_t* b = args.map(layout, place);
  if (!b) return false;
  uint32_t w13;
  __builtin_memcpy(&w13, b + kWord13Offset, 4);
  return w13 == 0;
}

//! Whether a watched place's bytes on this launch may now hold a map and deserve a full look (read_map): not
//! available (nullptr), or word 13 no longer 0 and every reserved word clear. Other data (a list rewritten on every
//! launch) costs two loads and no search. The launch fast path and the full check ask the same question.
inline bool watched_place_may_hold_map(const uint8_t* b) {
  if (!b) return true;
  uint32_t w13;
  __builtin_memcpy(&w13, b + kWord13Offset, 4);
  return w13 != 0 && words::reserved_words_clear(b);
}

//! Places in a launch's parameters that may hold a device address: every 8-byte parameter (offset 0), then the
//! 8-byte-aligned words of parameters over 128 bytes (a CUTLASS Params struct's workspace pointer), in order, at most
//! 64 places in all (Space::kParam places: where the pointer sits).
std::vector<MapPlace> pointer_places(const ParamLayout& layout);

}  // namespace tmaguard
