// libFuzzer target: the launch path above the decoder, with arbitrary parameter layouts (counts, offsets, sizes,
// map slots, NULL parameters) and both argument forms (kernelParams, and the `extra` buffer with or without a
// declared size). Every byte read must lie inside what the caller provided (ASan), the fast path's and the full
// check's launch keys must agree, and judging must not crash.
#include <memory>
#include <optional>
#include <vector>

#include "input.h"
#include "core/launch_key.h"
#include "core/struct_search.h"
#include "tmaguard/judge.h"
#include "tmaguard/launch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  tmaguard::ParamLayout layout;
  const unsigned nparams = in.take<uint8_t>() % 24;
  std::size_t off = 0;
  for (unsigned i = 0; i < nparams; ++i) {
    const std::size_t sz = in.take<uint8_t>() % 2 ? 128 : (in.take<uint16_t>() % 1100);
    off += in.take<uint8_t>() % 64;
    layout.offsets.push_back(off);
    layout.sizes.push_back(sz);
    off += sz;
  }
  std::vector<tmaguard::MapPlace> slots;
  const unsigned nslots = in.take<uint8_t>() % 12;
  for (unsigned i = 0; i < nslots; ++i) slots.push_back({in.take<uint8_t>() % 26u, (in.take<uint16_t>() % 1200u)});
  // The argument memory: one exact-size allocation per parameter (kernelParams), or one buffer (extra).
  std::vector<std::unique_ptr<uint8_t[]>> owned;
  std::vector<void*> params;
  for (unsigned i = 0; i < nparams; ++i) {
    if (in.take<uint8_t>() % 8 == 0) {
      params.push_back(nullptr);
      continue;
    }
    owned.emplace_back(new uint8_t[layout.sizes[i] ? layout.sizes[i] : 1]);
    const std::string bytes = in.take_string(layout.sizes[i]);
    std::memcpy(owned.back().get(), bytes.data(), bytes.size());
    params.push_back(owned.back().get());
  }
  const std::size_t buf_size = in.take<uint16_t>() % 4096;
  std::unique_ptr<uint8_t[]> buf(new uint8_t[buf_size ? buf_size : 1]);
  std::size_t declared = buf_size;
  const uint8_t form = in.take<uint8_t>() % 4;
  void* extra[5] = {reinterpret_cast<void*>(1), buf.get(), reinterpret_cast<void*>(2), &declared, nullptr};
  if (form == 2) extra[2] = nullptr;  // BUFFER_POINTER only: nothing past it may be read
  const tmaguard::LaunchArgs args = form == 0   ? tmaguard::LaunchArgs{params.data(), nullptr, 0, true}
                                    : form == 3 ? tmaguard::parse_extra(nullptr)
                                                : tmaguard::parse_extra(extra);
  // Maps inside larger parameters: every reported slot must lie inside its parameter, decode plausibly, and be
  // readable through LaunchArgs::map (the scan reads only what the caller provided: ASan).
  const tmaguard::StructSearch found = tmaguard::search_structs(layout, args);
  for (const auto& s : found.maps) {
    if (s.param >= layout.sizes.size() || s.offset + tmaguard::kTensorMapBytes > layout.sizes[s.param]) __builtin_trap();
    const uint8_t* m = args.map(layout, s);
    if (!m || !tmaguard::read_map(m, tmaguard::MapEvidence::kInStruct).ok()) __builtin_trap();
  }
  for (const auto& s : found.watch)  // a watched place is readable and unfilled now (all zeros)
    if (!tmaguard::still_empty(layout, s, args) || !tmaguard::unfilled_place(args.map(layout, s))) __builtin_trap();
  std::vector<const uint8_t*> bytes;
  for (const auto& s : slots) bytes.push_back(args.map(layout, s));
  uint64_t k1 = 0, k2 = 0;
  std::vector<uint64_t> hashes(bytes.size());
  const bool a = tmaguard::launch_key(42, tmaguard::kFixedHashKey, bytes.size(), [&](std::size_t i) { return bytes[i]; }, &k1, hashes.data());
  const bool b = tmaguard::launch_key(42, tmaguard::kFixedHashKey, slots.size(), [&](std::size_t i) { return args.map(layout, slots[i]); },
                                      &k2);
  if (a != b || (a && k1 != k2)) __builtin_trap();  // the fast path and the full check must key alike
  if (!a) return 0;
  std::vector<tmaguard::TensorMapParam> maps;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    maps.push_back({slots[i], tmaguard::read_map(bytes[i], i % 2 ? tmaguard::MapEvidence::kKnown
                                                                : tmaguard::MapEvidence::kParameter)});
  static const auto rules = tmaguard::parse_rules(tmaguard::builtin_rules_text(), "built-in").rules;
  for (const char* k : {"kernel_FlashAttentionBackwardSm100_0", "plain"})
    (void)tmaguard::judge_launch(*rules, tmaguard::rules_for_kernel(*rules, k), k, maps, tmaguard::Arch{9, 0});
  return 0;
}
