// tmaguard: the CUtensorMap byte format (decode, encode, the driver's argument rules). Pure code, no CUDA calls.
//
// Axis convention, stated once: dim 0 is the INNERMOST (contiguous) dimension, as in cuTensorMapEncode*.
// A torch tensor of shape (b, s, h, d) therefore appears as dims {d, s, h, b}. strides[i] is the byte stride
// of dimension i + 1 (dimension 0 is always contiguous), exactly like the driver's globalStrides argument.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tmaguard {

inline constexpr int kMaxRank = 5;
inline constexpr std::size_t kTensorMapBytes = 128;
// Largest tile the H200 driver accepted (elemsize x prod(floor(box / elementStride)), 228 KiB).
inline constexpr uint64_t kMaxTileBytesSm90 = 233472;

// CUtensorMapDataType values (the API enum, not the hardware code stored in the descriptor).
enum class DataType : uint8_t {
  kU8 = 0,
  kU16,
  kU32,
  kS32,
  kU64,
  kS64,
  kF16,
  kF32,
  kF64,
  kBF16,
  kF32Ftz,
  kTF32,
  kTF32Ftz,
  k16U4Align8B,
  k16U4Align16B,
  k16U6Align16B,
  kUnknown = 255
};
enum class MapKind : uint8_t { kTiled = 0, kIm2col = 1, kIm2colWide = 2 };

//! Who wrote a descriptor, as the words an encoder fills or leaves empty tell (docs/descriptor-forms.md):
//!   kDriver       cuTensorMapEncode*: the tile-size word (w16) and the swizzle-span word (w18) filled, w2 bit 1 clear
//!   kCuteDsl      CuTe DSL's generated host code (FlashAttention-4's encoder): w2 bit 1 set, w16 and w18 empty
//!   kDeviceBuilt  PTX tensormap.replace on a zero-filled descriptor (Triton's device-side descriptors): w2 bit 1
//!                 clear, w16 and w18 empty
//!   kUnknown      a consistent descriptor whose form words match none of these (no map where maps are searched for)
//! The layout fields (address, rank, type, dims, strides, boxes, swizzle) mean the same in every form: the TMA unit
//! reads them, not the form words.
enum class Encoder : uint8_t { kDriver = 0, kCuteDsl, kDeviceBuilt, kUnknown };
const char* to_string(Encoder e);

const char* to_string(DataType t);
//! Bytes per element, 0 for unknown or sub-byte packed types.
int element_size(DataType t);
bool is_float(DataType t);
//! Inner-box byte span a swizzle mode allows: 0 (none), 32, 64, 128.
uint32_t swizzle_span(uint32_t swizzle);
const char* swizzle_name(uint32_t swizzle);
//! The swizzle-span word (w18) the driver writes for a swizzle mode: 0x10 (none), 0x100, 0x200, 0x400.
uint32_t swizzle_span_word(uint32_t swizzle);
const char* interleave_name(uint32_t interleave);

//! Arguments of cuTensorMapEncodeTiled / Im2col / Im2colWide, in the driver's own words.
struct EncodeArgs {
  MapKind kind = MapKind::kTiled;
  uint32_t dtype = 0;  // raw CUtensorMapDataType value (may be out of range: that is a rule to check)
  uint32_t rank = 0;
  uint64_t address = 0;
  std::array<uint64_t, kMaxRank> dims{};
  std::array<uint64_t, kMaxRank> strides{};  // strides[0..rank-2]
  std::array<uint32_t, kMaxRank> box{};      // tiled only
  std::array<uint32_t, kMaxRank> element_strides{};
  std::array<int32_t, 3> lower_corner{};  // im2col: rank-2 values; wide: [0] is the W corner
  std::array<int32_t, 3> upper_corner{};
  uint32_t channels_per_pixel = 0;  // im2col
  uint32_t pixels_per_column = 0;   // im2col
  uint32_t wide_mode = 0;           // im2col wide
  uint32_t interleave = 0, swizzle = 0, l2_promotion = 0, oob_fill = 0;
};

//! EncodeArgs from a cuTensorMapEncode* call's own arguments (box, corners and im2col sizes are set by the caller).
//! Defensive, as a caller's arrays may be anything: NULL arrays stay zero, at most kMaxRank entries are read.
EncodeArgs encode_args(MapKind kind, uint32_t dtype, uint32_t rank, uint64_t address, const uint64_t* dims,
                       const uint64_t* strides, const uint32_t* element_strides, uint32_t interleave, uint32_t swizzle,
                       uint32_t l2_promotion, uint32_t oob_fill);

//! The kinds of encode warning, so that repeats can be told apart without their text. The last two need the driver
//! (where an address lives): the shim finds them (hooks_encode.cpp).
enum EncodeWarning : int {
  kNoWarning = 0,
  kNullAddress,
  kZeroStride,
  kOverlappingRows,
  kNotAllocated,
  kBeyondAllocation,
  kEncodeWarningKinds
};

//! Why the driver rejects a set of encode arguments; empty `field` means they are accepted.
struct EncodeProblem {
  std::string field;                // e.g. "boxDim[0]"
  std::string message;              // one line: the value and the rule it breaks
  EncodeWarning kind = kNoWarning;  // for encode_warnings() and aliasing()
  explicit operator bool() const { return !field.empty(); }
};

//! The first rule (in the driver's own order as measured on an H200, driver 580) that the arguments break.
EncodeProblem validate_encode(const EncodeArgs& a);
//! The driver's rule for a global address alone, as validate_encode applies it: 16-byte aligned, 32 with interleave
//! 32B (`interleave`: a CUtensorMapInterleave value).
EncodeProblem address_problem(uint64_t address, uint32_t interleave);

//! A template: every dim 1. CUTLASS's grouped and ptr-array GEMMs (PyTorch's torch._grouped_mm among them) encode one
//! per operand and rewrite its address, dims and strides on the device before any use: its box, strides and address
//! describe no tensor yet.
bool template_args(const EncodeArgs& a);

//! Arguments the driver accepts but that are wrong for any use of the map: a NULL address. One line each; empty when
//! none, and always empty for a template (every dim 1), which device code fills in later. What is wrong only for
//! some uses is not here: a broadcast (stride-0) dimension or overlapping rows are how expand()ed and sliding-window
//! views are loaded (aliasing(), for the maps a kernel stores through), and a box larger than a short tensor only
//! reads zeros and drops stores past its end.
std::vector<EncodeProblem> encode_warnings(const EncodeArgs& a);

//! Whether elements of the map share bytes: a stride-0 dimension of more than one index, or rows that overlap
//! (judged in stride order, dimensions of one index ignored). Harmless to load through; a TMA store through such a
//! map writes the same bytes from several tiles, in no defined order. Never for a template or a map built on address
//! wraparound (Triton's ragged descriptors overlap by design).
std::optional<EncodeProblem> aliasing(const EncodeArgs& a);

//! Bytes from the base address to one past the last element the arguments describe; nullopt when that does not fit
//! in 64 bits.
std::optional<uint64_t> footprint_bytes(const EncodeArgs& a);
//! The byte range [first, end) the map covers, or nullopt when the map is built on address arithmetic rather than
//! on a plain tensor, as Triton's ragged descriptors are by design: its footprint or its end overflows 2^64, or a
//! dimension of 2^30 or more rows aliases another (same byte stride). No bounds claim can be made about such a map.
struct ByteRange {
  uint64_t first, end;
};
std::optional<ByteRange> map_range(const EncodeArgs& a);

//! Whether two maps address a common byte (two outputs of one launch must not: the stores of one overwrite the
//! other). Exact for maps with the same layout at different addresses (views into one packed buffer, interleaved or
//! not) and a bounded search for other pairs; nullopt when it cannot tell (a template, a map on address wraparound,
//! rows that overlap within one map, or more than the search's budget of sub-blocks).
std::optional<bool> maps_share_bytes(const EncodeArgs& a, const EncodeArgs& b);

//! Encodes like the real driver: 0 (CUDA_SUCCESS) and 128 bytes, or 1 (CUDA_ERROR_INVALID_VALUE) with the first
//! 12 bytes written and `problem` set. Byte format pinned to H200 captures (tests/data/encode_golden_h200.txt).
int encode(const EncodeArgs& a, uint8_t out[kTensorMapBytes], EncodeProblem* problem = nullptr);

//! A decoded CUtensorMap. Fields follow EncodeArgs; see the axis convention at the top of this file.
struct TensorMapView {
  MapKind kind = MapKind::kTiled;
  DataType dtype = DataType::kUnknown;
  uint32_t hw_type = 0;  // 4-bit code in the descriptor
  uint32_t rank = 0;
  uint64_t address = 0;
  std::array<uint64_t, kMaxRank> dims{};
  std::array<uint64_t, kMaxRank> strides{};  // byte strides of dims 1..rank-1, strides[i] for dim i+1
  std::array<uint32_t, kMaxRank> box{};      // tiled: box; im2col: {channelsPerPixel, pixelsPerColumn}
  std::array<uint32_t, kMaxRank> element_strides{};
  std::array<int32_t, 3> lower_corner{}, upper_corner{};
  uint32_t channels_per_pixel = 0, pixels_per_column = 0;
  uint32_t interleave = 0, swizzle = 0, swizzle_atomicity = 0, l2_promotion = 0, oob_fill = 0;
  uint32_t sm100_bits = 0;  // word 2 bits 19-21 (swizzle atomicity; bit 21 the large-tensor flag): the H200's driver
                            // sets none; CuTe DSL sets bit 21 for tensors spanning 128 KiB or more
  uint32_t tile_bytes = 0;  // as stored in the descriptor (0 in the forms that leave it empty)
  uint32_t swizzle_span_word = 0;  // as stored (0x10, 0x100, 0x200, 0x400; 0 in the forms that leave it empty)
  bool word2_bit1 = false;  // CuTe DSL's marker
  // Stride words past the rank held values (the device convention only, decode()): a map rewritten on the device
  // keeps what its template had there (the TMA unit reads no stride past the rank).
  bool stale_strides_past_rank = false;
  // The hardware convention only (decode()): bit i set when word i holds bits the TMA unit does not read (word 2's
  // bits 2-3 and 22-31, word 15 of a tiled map, words 16-31, and every field past the rank). Shown in records.
  uint32_t ignored_words = 0;
  // The tensor under a ragged map only (ragged_tensor()): bit i set when dim i's extent is a sequence's, not the map's
  // (the map says 2^30). Checks treat such a dim as matching any extent.
  uint8_t ragged_dims = 0;
  Encoder encoder = Encoder::kDriver;

  //! Word 2 bit 21: the large-tensor flag (NVIDIA's 595.71 notes; CuTe DSL sets it, CUTLASS and Triton may clear it).
  bool large_tensor_flag() const { return (sm100_bits & 4) != 0; }
  //! Whether the tile-size and swizzle-span words were written (only the driver's form fills them).
  bool form_words_filled() const { return encoder == Encoder::kDriver; }

  //! Tile bytes recomputed from the fields (what a correct encoder stores).
  uint64_t computed_tile_bytes() const;
  //! The encode arguments that describe this map (what validate_encode and footprint_bytes judge).
  EncodeArgs encode_args() const;
};

//! Why 128 bytes are not a tensor map (structure only); empty when they are.
struct DecodeResult {
  TensorMapView view;
  std::string not_a_map;  // empty: decoded; else the first structural inconsistency
  bool ok() const { return not_a_map.empty(); }
};

//! Decodes 128 bytes in any encoder's form (Encoder). Structural checks (zero words past the rank, reserved bits and
//! words zero, rank <= 5) tell a descriptor from any other 128-byte parameter; the form words say who wrote it. A
//! form that leaves the tile-size and swizzle-span words empty carries less redundancy, so its bytes count as a map
//! only with a known element type and an inner box spanning a multiple of 16 bytes (every TMA box does): a zero-
//! filled or zero-padded region never decodes as a map. Word 2 bit 1 (CuTe DSL's) and bits 19-21 (Blackwell swizzle
//! atomicity, the large-tensor flag) are known bits, never reserved ones.
//! kDevice: the convention for maps found in device memory (find_device_maps). Besides the forms above, a map that
//! device code rewrote with tensormap.replace from a template of another rank keeps the template's stride words
//! past its rank (PyTorch's CUTLASS grouped GEMM on an H200: three stale words); the TMA unit ignores them, so this
//! convention accepts them (view.stale_strides_past_rank) where the strict one refuses them.
//! kHardware: the convention for a place where a map is known to sit (launch.h: MapEvidence::kKnown): only the
//! fields the TMA unit reads count, as the unit reads them. Measured on an H200: TMA stores land correctly with
//! words 15, 17 and 19-31 holding anything, word 2's top byte set and wrong tile-size and swizzle-span words, so
//! such bytes are a map here (view.ignored_words names the words) and their layout is judged; the strict convention
//! refuses them. Only what leaves the fields unreadable (a rank field over 5, an im2col map of rank < 3 or with
//! more than 1024 pixels per column, a tf32 flag on a non-f32 type) makes them no map.
enum class Convention { kStrict, kDevice, kHardware };
DecodeResult decode(const uint8_t bytes[kTensorMapBytes], Convention convention = Convention::kStrict);
//! A cheap first look, for bytes seen on every launch: false when decode() would refuse them for their reserved
//! words and bits alone (true says nothing more than "decode them").
bool may_hold_map(const uint8_t bytes[kTensorMapBytes]);

//! Ragged maps: a map built on coordinate arithmetic over an underlying tensor, so that one map serves sequences of
//! different lengths (varlen attention) with the hardware's bounds check per sequence.
//!   kPtrShift    quack's create_ragged_tensor_for_tma(ptr_shift=True), FA4 SM90's varlen dK/dV: the ragged mode's
//!                extent is 2^30, one last mode of 2^31 - 1 with the ragged mode's stride is appended, and the address
//!                is the tensor's base minus 2^30 x that stride (outside any allocation, by design)
//!   kWraparound  Triton's tools/ragged_tma.py (and quack's without ptr_shift): the ragged mode's extent is 2^30, two
//!                last modes of 0x7fff0000 (or 2^31 - 1) with byte strides S and 2^34 x elemsize - S appended (S the
//!                ragged mode's), the address the tensor's own (64-bit wraparound cancels the offset)
enum class Ragged : uint8_t { kNone, kPtrShift, kWraparound };
const char* to_string(Ragged r);
struct RaggedTensor {
  Ragged form = Ragged::kNone;
  uint32_t dim = 0;     // the ragged mode (a dim of the tensor and of the map alike)
  TensorMapView tensor;  // the map without its extra modes, at the tensor's base; tensor.ragged_dims has `dim`
};
//! The tensor under a ragged map, or nullopt when the map is not one.
std::optional<RaggedTensor> ragged_tensor(const TensorMapView& v);
//! The view checks judge a map by: the tensor under a ragged map, else the map itself.
TensorMapView judged_view(const TensorMapView& v);

//! Encodes in another encoder's form (for tests and GPU checks; `encode` is the driver's form): kCuteDsl writes what
//! CuTe DSL's generated host code writes (the formulas of its MLIR pass dumps, pinned by tests/data), kDeviceBuilt
//! what PTX tensormap.replace leaves in a zero-filled descriptor (pinned by bytes captured on an H200). The arguments
//! must be ones the driver accepts (0); otherwise 1 and nothing but the address is written.
int encode_in_form(Encoder form, const EncodeArgs& a, uint8_t out[kTensorMapBytes]);

//! The key of content_hash: sixteen 64-bit words, one per 8-byte word of a descriptor. The shim draws a random one
//! per process (process/hash_key.h) for every hash that decides whether a launch may skip its check, so that bytes
//! crafted against a known key (a lane of words the TMA unit ignores set to force a sum) cannot collide with a clean
//! launch's; kFixedHashKey serves tests, fuzzers and benchmarks.
struct HashKey {
  uint64_t k[16];
};
inline constexpr HashKey kFixedHashKey{{0xbe4ba423396cfeb8ULL, 0x1cad21f72c81017cULL, 0xdb979083e96dd4deULL,
                                        0x1f67b3b7a4a44072ULL, 0x78e5c0cc4ee679cbULL, 0x2172ffcc7dd05a82ULL,
                                        0x8e2443f7744608b8ULL, 0x4c263a81e69035e0ULL, 0xcb00c391bb52283cULL,
                                        0xa32e531b8b65d088ULL, 0x4ef90da297486471ULL, 0xd8acdea946ef1938ULL,
                                        0x3f349ce33f76faa8ULL, 0x1d4f0bc7c7bbdcf9ULL, 0x3159b4cd4be0518aULL,
                                        0x647378d9c97e9fc8ULL}};

//! 64-bit keyed content hash of all 128 bytes: every bit that can change a verdict (word 2 bit 21 decides whether a
//! would-reject finding is an error) is in it, so a launch key made of these hashes never calls different bytes
//! clean. Inline: the launch fast path hashes every tensor-map parameter. NH, UMAC's universal hash: the sum, modulo
//! 2^128, of (m[2i] + k[2i]) * (m[2i+1] + k[2i+1]) over the eight word pairs (two different descriptors collide for at
//! most a 2^-64 share of keys, whatever bytes an adversary picks without knowing the key); then both halves of the
//! sum folded with a keyed multiply and an avalanche. Eight independent 64x64->128 products pipeline.
inline uint64_t content_hash(const uint8_t bytes[kTensorMapBytes], const HashKey& key) {
  unsigned __int128 acc = 0;
  for (int i = 0; i < 8; ++i) {
    uint64_t a, b;
    __builtin_memcpy(&a, bytes + 16 * i, 8);
    __builtin_memcpy(&b, bytes + 16 * i + 8, 8);
    acc += static_cast<unsigned __int128>(a + key.k[2 * i]) * (b + key.k[2 * i + 1]);
  }
  uint64_t h = static_cast<uint64_t>(acc) ^ ((static_cast<uint64_t>(acc >> 64) ^ key.k[0]) * 0x9e3779b97f4a7c15ULL);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
//! The same with the fixed key (tests, fuzzers, benchmarks).
inline uint64_t content_hash(const uint8_t bytes[kTensorMapBytes]) { return content_hash(bytes, kFixedHashKey); }

//! The hash provenance is recorded and looked up by: content_hash with word 2 bit 21 cleared, because CUTLASS and
//! Triton clear that flag after encoding (on drivers that set it), and the cleared bytes still came from the encode.
inline uint64_t provenance_hash(const uint8_t bytes[kTensorMapBytes], const HashKey& key = kFixedHashKey) {
  uint8_t b[kTensorMapBytes];
  __builtin_memcpy(b, bytes, kTensorMapBytes);
  b[10] &= static_cast<uint8_t>(~(1u << 5));  // word 2 (bytes 8-11), bit 21 = byte 10 bit 5
  return content_hash(b, key);
}

}  // namespace tmaguard
