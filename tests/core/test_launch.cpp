// Reading a launch's tensor maps: where a map can sit inside a larger parameter, how the parameter block's base is
// derived from the driver's own placement, that struct fields are not taken for maps, and the extra form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "core/launch_key.h"
#include "core/struct_search.h"
#include "tmaguard/launch.h"
#include "golden_file.h"
#include "window_corpora.h"

using namespace tmaguard;

namespace {

std::vector<uint8_t> a_map(uint64_t addr, uint64_t d0, uint64_t d1) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = addr;
  a.dims = {d0, d1};
  a.strides = {2 * d0};
  a.box = {64, 64};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  std::vector<uint8_t> b(kTensorMapBytes);
  EXPECT_EQ(encode(a, b.data()), 0);
  return b;
}

}  // namespace

// Windows sit at multiples of 64 from the parameter's start: a structure holding a CUtensorMap is at least 64-byte
// aligned, so nothing about the block's base (or about any other kernel) is needed.
TEST(StructMaps, WindowsAreMultiplesOf64FromTheParametersStart) {
  const ParamLayout cutlass{{112}, {1792}};  // as on the H200: PyTorch's grouped GEMM Params
  const auto w = window_offsets(cutlass, 0);
  ASSERT_EQ(w.size(), 27u);
  EXPECT_EQ(w.front(), 0u);
  EXPECT_EQ(w.back(), 1664u);
  EXPECT_EQ(window_offsets(ParamLayout{{8}, {512}}, 0).front(), 0u);
  EXPECT_TRUE(window_offsets(ParamLayout{{0}, {100}}, 0).empty());
}

TEST(StructMaps, MapsInsideAParamsStructAreFoundWhereTheyAre) {
  std::vector<uint8_t> params(1792, 0);
  const int32_t shape[4] = {512, 256, 128, 1};
  std::memcpy(params.data(), shape, sizeof shape);
  for (const auto& [at, map] : std::vector<std::pair<std::size_t, std::vector<uint8_t>>>{
           {128, a_map(0x7f0000000000ULL, 128, 512)}, {384, a_map(0x7f0001000000ULL, 128, 256)},
           {1152, a_map(0x7f0003000000ULL, 256, 512)}})
    std::memcpy(params.data() + at, map.data(), map.size());
  const uint64_t ptr = 0x7f0007000000ULL;
  std::memcpy(params.data() + 264, &ptr, 8);
  void* kp[1] = {params.data()};
  const ParamLayout layout{{112}, {1792}};
  const StructSearch found = search_structs(layout, LaunchArgs{kp, nullptr, 0, true});
  const auto& slots = found.maps;
  ASSERT_EQ(slots.size(), 3u);
  EXPECT_EQ(slots[0], (MapPlace{0, 128}));
  EXPECT_EQ(slots[1], (MapPlace{0, 384}));
  EXPECT_EQ(slots[2], (MapPlace{0, 1152}));
  EXPECT_FALSE(found.incomplete);
  // Unfilled places (128 zero bytes) are watched: a map can appear there later. Places holding other fields are not,
  // even where their word 13 is 0 (the shape fields at +0 end at +16; the pointer at +264 leaves 256's word 13 0).
  EXPECT_EQ(std::count(found.watch.begin(), found.watch.end(), MapPlace{0, 896}), 1);
  EXPECT_EQ(std::count(found.watch.begin(), found.watch.end(), MapPlace{0, 0}), 0) << "the shape fields are data";
  EXPECT_EQ(std::count(found.watch.begin(), found.watch.end(), MapPlace{0, 256}), 0) << "the pointer is data";
  EXPECT_EQ(std::count(found.watch.begin(), found.watch.end(), MapPlace{0, 1664}), 1);
  for (const MapPlace& m : slots) EXPECT_EQ(std::count(found.watch.begin(), found.watch.end(), m), 0);
  // The same in the extra form, bounded by the declared size: a buffer that ends before the last map hides it, and
  // the search says it is incomplete (it is made again when a launch provides the rest).
  std::vector<uint8_t> buffer(112 + 1792);
  std::memcpy(buffer.data() + 112, params.data(), params.size());
  EXPECT_EQ(search_structs(layout, LaunchArgs{nullptr, buffer.data(), buffer.size(), true}).maps.size(), 3u);
  const StructSearch partial = search_structs(layout, LaunchArgs{nullptr, buffer.data(), 112 + 1200, true});
  EXPECT_EQ(partial.maps.size(), 2u);
  EXPECT_TRUE(partial.incomplete);
  // Without the caller's bytes, nothing is searched.
  void* none[1] = {nullptr};
  EXPECT_TRUE(search_structs(layout, LaunchArgs{none, nullptr, 0, true}).maps.empty());
  EXPECT_TRUE(search_structs(layout, LaunchArgs{none, nullptr, 0, true}).incomplete);
}

TEST(StructMaps, TemplatesAreRecognised) {
  EncodeArgs a;
  a.dtype = 1;
  a.rank = 2;
  a.dims = {1, 1};
  a.strides = {16};
  a.box = {64, 128};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  uint8_t b[128];
  ASSERT_EQ(encode(a, b), 0);
  const DecodeResult d = read_map(b, MapEvidence::kInStruct);
  EXPECT_TRUE(d.ok()) << d.not_a_map;
  EXPECT_TRUE(template_map(d.view));
  EXPECT_FALSE(template_map(decode(a_map(0x7f0000000000ULL, 128, 512).data()).view));
}

// No false maps: windows of every class real parameters hold (tests/core/window_corpora.h: float32 / half / bf16
// arrays sparse and dense, bitmasks, shape-and-stride structs, pointer tables, integers, struct fields, zero-padded
// regions, random bytes, the padding around real maps of every form) are never taken for a tensor map where maps are
// only searched for (a whole 128-byte parameter, a window inside a structure, device memory), and so never draw an
// error-severity finding. 200 thousand of each class here; scripts/bench.sh prints the rates over 10^8 per class.
TEST(StructMaps, WindowsOfEveryClassAreNeverTakenForAMap) {
  std::mt19937_64 rng(20261202);
  for (const corpora::Class& c : corpora::classes()) {
    corpora::Tally t;
    corpora::run(c, rng, 200000, t);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(t.maps[i], 0) << c.name << " read as " << to_string(corpora::kSearched[i]) << ", of " << t.windows;
      EXPECT_EQ(t.errors[i], 0) << c.name << " read as " << to_string(corpora::kSearched[i]);
    }
  }
  corpora::Tally around;
  corpora::around_real_maps(rng, 4000, around);
  EXPECT_GT(around.windows, 200000);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(around.maps[i], 0) << to_string(corpora::kSearched[i]);
  uint8_t w[128];
  // The closest a struct of zeros comes: a 1 at +64 (tile-size word) and a 16 at +72 (no-swizzle span word) would
  // read as a driver-form rank-1 map of one byte with a consistent tile word; its 1-byte inner box gives it away,
  // as a whole parameter (no NULL-address abort) and inside a structure.
  std::memset(w, 0, sizeof w);
  const uint32_t one = 1, span = 0x10;
  std::memcpy(w + 64, &one, 4);
  std::memcpy(w + 72, &span, 4);
  EXPECT_EQ(decode(w).not_a_map,
            "not a TMA box: an inner box of 1 x 1 B (word 2 bit 1 = 0, tile-size word 0x1, swizzle-span word 0x10)");
  EXPECT_FALSE(read_map(w, MapEvidence::kInStruct).ok());
}

// A float[32] of zeros with 0.5f as its 14th element (word 13 = 0x3f000000) once read as a device-built rank-1 map of
// uint8 at address 0 and aborted a healthy job with tmap-null-address; so did -0.5f, an int 0x0F000000, and halfs of
// 1.75 or 28.0 in that place. None of them is a map anywhere maps are only searched for, nor where a rule names the
// kernel (no tensor is described: NULL, every dim 1, every stride 0).
TEST(StructMaps, AStrayValueInZerosIsNoMapAnywhere) {
  auto window_with = [](std::size_t at, const void* v, std::size_t n) {
    std::vector<uint8_t> w(128, 0);
    std::memcpy(w.data() + at, v, n);
    return w;
  };
  const float half_f = 0.5f, minus = -0.5f;
  const uint32_t flag = 0x0F000000u;
  const uint16_t h175 = corpora::half_bits(1.75f), h28 = corpora::half_bits(28.0f);
  const std::vector<std::vector<uint8_t>> windows = {window_with(52, &half_f, 4), window_with(52, &minus, 4),
                                                     window_with(52, &flag, 4),   window_with(54, &h175, 2),
                                                     window_with(54, &h28, 2)};
  for (const auto& w : windows)
    for (const MapEvidence e : {MapEvidence::kKnown, MapEvidence::kParameter, MapEvidence::kInStruct,
                                MapEvidence::kDeviceMemory}) {
      const DecodeResult d = read_map(w.data(), e);
      EXPECT_FALSE(d.ok()) << to_string(e);
    }
  // A pointer, zeros and 0.5f at +52 (word 13): inside a structure this block once read as a map and shifted a rule's
  // map order; it is no map inside a structure, nor as a searched parameter's device-built map.
  std::vector<uint8_t> block = window_with(52, &half_f, 4);
  const uint64_t ptr = 0x7f0000100000ULL;
  std::memcpy(block.data(), &ptr, 8);
  EXPECT_FALSE(read_map(block.data(), MapEvidence::kInStruct).ok());
}

// Maps in device memory read back after a kernel: found at 64-byte-aligned device addresses in any form (Triton's
// device-built descriptors leave the tile-size and swizzle-span words 0), whatever the read's own alignment.
TEST(DeviceMaps, FoundAt64ByteAlignedDeviceAddresses) {
  EncodeArgs a;
  a.dtype = 9;
  a.rank = 2;
  a.address = 0x7f0000010000ULL;
  a.dims = {64, 128};
  a.strides = {128};
  a.box = {64, 64};
  a.element_strides = {1, 1};
  a.swizzle = 3;
  std::vector<uint8_t> buf(2048, 0);
  for (int p = 0; p < 4; ++p) ASSERT_EQ(encode_in_form(Encoder::kDeviceBuilt, a, buf.data() + 256 * p + 128), 0);
  const auto found = find_device_maps(buf.data(), buf.size(), 0x7f0000200000ULL);
  ASSERT_EQ(found.size(), 4u);
  for (int p = 0; p < 4; ++p) EXPECT_EQ(found[p].at, 256u * p + 128);
  EXPECT_EQ(found[0].decoded.view.encoder, Encoder::kDeviceBuilt);
  // The same bytes read from 32 bytes before a 64-byte boundary: the windows move with the device addresses.
  std::vector<uint8_t> shifted(32, 0);
  shifted.insert(shifted.end(), buf.begin(), buf.end());
  const auto moved = find_device_maps(shifted.data(), shifted.size(), 0x7f0000200000ULL - 32);
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved[0].at, 160u);
  // Zeros, random bytes and a map cut off by the end of the read are not maps.
  EXPECT_TRUE(find_device_maps(buf.data(), 128 + 127, 0x7f0000200000ULL).empty());
  std::mt19937_64 rng(7);
  std::vector<uint8_t> noise(1 << 16);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  EXPECT_TRUE(find_device_maps(noise.data(), noise.size(), 0x7f0000300000ULL).empty());
  EXPECT_EQ(to_string(MapPlace::device(3, 0, 128)), "3->128");
  EXPECT_EQ(to_string(MapPlace::device(0, 64, 0)), "0+64->0");
  EXPECT_FALSE(MapPlace::device(3, 0, 128).overlaps(MapPlace{3, 0}));
}

// A per-group map PyTorch 2.11's CUTLASS grouped GEMM (torch._grouped_mm, 2D x 3D, bf16) left in its workspace on an
// H200 (read back after the kernel, 2026-12-01): the store map of one group's output, rank 2, dims {512, 256}, row
// stride 1024 bytes, box {32, 128}, 64B swizzle, driver-form words 16 and 18 of the template, and the template's
// values still in stride words 1..3 (past the rank; the TMA unit ignores them, and the GEMM's results were right).
TEST(DeviceMaps, AMapRewrittenOnTheDeviceWithStaleStridesPastItsRankIsFound) {
  const std::string hex =
      "0000b099ff7e0000104504004000000098340000983400009834000000000000ff010000ff0000000000000000000000000000000000001f"
      "7f00000000000000002000000000000000020000000000000000000000000000000000000000000000000000000000000000000000000000"
      "00000000000000000000000000000000";
  ASSERT_EQ(hex.size(), 256u);
  std::vector<uint8_t> map(kTensorMapBytes);
  for (std::size_t i = 0; i < kTensorMapBytes; ++i) map[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  const DecodeResult strict = decode(map.data());
  EXPECT_FALSE(strict.ok()) << "a parameter's map keeps the strict rules";
  EXPECT_EQ(strict.not_a_map, "stride word 1 set past rank 2");
  const DecodeResult device = decode(map.data(), Convention::kDevice);
  ASSERT_TRUE(device.ok()) << device.not_a_map;
  EXPECT_TRUE(device.view.stale_strides_past_rank);
  EXPECT_EQ(device.view.rank, 2u);
  EXPECT_EQ(device.view.dims[0], 512u);
  EXPECT_EQ(device.view.dims[1], 256u);
  EXPECT_EQ(device.view.strides[0], 1024u);
  EXPECT_EQ(device.view.strides[1], 0u) << "the stale words are not read as strides";
  EXPECT_EQ(device.view.box[0], 32u);
  EXPECT_EQ(device.view.box[1], 128u);
  EXPECT_EQ(device.view.address, 0x7eff99b00000ULL);
  // In the workspace: two 128-byte records of other data, then the map (found at its place, nothing else).
  std::vector<uint8_t> workspace(1024, 0);
  for (std::size_t i = 0; i < 256; i += 8) {
    const uint64_t ptr = 0x7effb3e00000ULL + i * 0x10000;  // a pointer array, as the workspace begins
    std::memcpy(workspace.data() + i, &ptr, 8);
  }
  std::memcpy(workspace.data() + 512, map.data(), kTensorMapBytes);
  const auto found = find_device_maps(workspace.data(), workspace.size(), 0x7effb3ec0200ULL);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].at, 512u);
  EXPECT_TRUE(found[0].decoded.view.stale_strides_past_rank);
}

// The bytes real encoders wrote, laid out as Triton's global scratch holds them (program p's descriptors at p * 256 +
// {0, 128}): the descriptors Triton 3.6 itself left there on an H200, then CuTe DSL's host fill and the driver's
// encodes, each found where it sits.
TEST(DeviceMaps, FindsWhatRealEncodersWrote) {
  std::vector<std::vector<uint8_t>> maps;
  for (const golden::Case& c : golden::load(std::string(TG_SOURCE_DIR) + "/tests/data/device_built_h200.txt"))
    if (c.f.at("source").rfind("triton", 0) == 0) maps.push_back(golden::bytes_of(c.f.at("map")));
  ASSERT_EQ(maps.size(), 6u);
  for (const char* file : {"cute_dsl_golden.txt", "encode_golden_h200.txt"}) {
    int taken = 0;
    for (const golden::Case& c : golden::load(std::string(TG_SOURCE_DIR) + "/tests/data/" + file)) {
      if (c.kind != "tiled" || c.f.count("rc") == 0 || c.f.at("rc") != "0" || c.f.count("map") == 0) continue;
      const DecodeResult d = read_map(golden::bytes_of(c.f.at("map")).data(), MapEvidence::kDeviceMemory);
      if (!d.ok()) continue;  // e.g. a NULL-address encode: never found anywhere (launch.h)
      maps.push_back(golden::bytes_of(c.f.at("map")));
      if (++taken == 6) break;
    }
    ASSERT_EQ(taken, 6) << file;
  }
  std::vector<uint8_t> scratch(maps.size() / 2 * 256 + 256, 0);
  for (std::size_t i = 0; i < maps.size(); ++i)
    std::memcpy(scratch.data() + (i / 2) * 256 + (i % 2) * 128, maps[i].data(), kTensorMapBytes);
  const auto found = find_device_maps(scratch.data(), scratch.size(), 0x7f0000400000ULL);
  ASSERT_EQ(found.size(), maps.size());
  for (std::size_t i = 0; i < maps.size(); ++i) {
    EXPECT_EQ(found[i].at, (i / 2) * 256 + (i % 2) * 128) << i;
    EXPECT_EQ(std::memcmp(scratch.data() + found[i].at, maps[i].data(), kTensorMapBytes), 0);
  }
  EXPECT_EQ(found[0].decoded.view.encoder, Encoder::kDeviceBuilt);
  EXPECT_EQ(found[6].decoded.view.encoder, Encoder::kCuteDsl);
  EXPECT_EQ(found[12].decoded.view.encoder, Encoder::kDriver);
}

// Pointers: 8-byte parameters, then 8-byte words of parameters over 128 bytes, at most 64.
TEST(DeviceMaps, PointerPlaces) {
  const ParamLayout l{{0, 8, 16, 24, 32}, {8, 4, 8, 128, 1024}};
  const auto p = pointer_places(l);
  ASSERT_EQ(p.size(), 64u);
  EXPECT_EQ(p[0], (MapPlace{0, 0}));
  EXPECT_EQ(p[1], (MapPlace{2, 0}));
  EXPECT_EQ(p[2], (MapPlace{4, 0}));
  EXPECT_EQ(p[3], (MapPlace{4, 8}));
}
