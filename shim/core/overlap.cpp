// tmaguard core: whether two tensor maps address a common byte (tensormap.h: maps_share_bytes).
//
// A map addresses {address + sum_i k_i * stride_i + t : 0 <= k_i < extent_i, 0 <= t < width}: its modes sorted by
// stride, dims of extent 1 dropped, modes contiguous in one another merged, and the innermost run of elements kept
// as `width` bytes. Two maps with the same modes at addresses delta apart share a byte exactly when delta is
// sum_i k_i * stride_i + t with |k_i| < extent_i and |t| < width; with rows that do not overlap each mode's stride
// exceeds everything inside it, so each digit has at most two candidates (a search of at most 2^rank leaves). Other
// pairs are split mode by mode, outermost first, keeping only the blocks whose byte spans meet, within a budget.
#include <algorithm>
#include <vector>

#include "tmaguard/tensormap.h"

namespace tmaguard {
namespace {

struct Mode {
  uint64_t extent, stride;
};
struct Block {
  uint64_t base = 0;
  std::vector<Mode> modes;  // by stride, innermost first
  uint64_t width = 0;       // bytes of the innermost contiguous run
  // One past the last byte, from base.
  uint64_t span() const {
    uint64_t s = width;
    for (const Mode& m : modes) s += (m.extent - 1) * m.stride;
    return s;
  }
};

// The block a map addresses, or nullopt when no claim can be made about it.
std::optional<Block> block_of(const EncodeArgs& a) {
  if (!map_range(a) || aliasing(a)) return std::nullopt;  // wraparound, or rows overlapping inside the map
  const uint32_t r = std::min<uint32_t>(a.rank, kMaxRank);
  const uint64_t es = static_cast<uint64_t>(element_size(static_cast<DataType>(a.dtype)));
  if (r == 0 || es == 0 || std::all_of(a.dims.begin(), a.dims.begin() + r, [](uint64_t d) { return d == 1; }))
    return std::nullopt;  // a template (every dim 1) describes no tensor yet
  Block b;
  b.base = a.address;
  std::vector<Mode> modes;
  for (uint32_t i = 0; i < r; ++i)
    if (a.dims[i] > 1) modes.push_back({a.dims[i], i == 0 ? es : a.strides[i - 1]});
  std::sort(modes.begin(), modes.end(), [](const Mode& x, const Mode& y) { return x.stride < y.stride; });
  b.width = es;
  for (const Mode& m : modes) {
    if (m.stride == b.width && b.modes.empty()) {
      b.width *= m.extent;  // contiguous with the run inside it
    } else if (!b.modes.empty() && m.stride == b.modes.back().extent * b.modes.back().stride) {
      b.modes.back().extent *= m.extent;  // contiguous with the mode inside it
    } else {
      b.modes.push_back(m);
    }
  }
  return b;
}

bool same_modes(const Block& x, const Block& y) {
  if (x.width != y.width || x.modes.size() != y.modes.size()) return false;
  for (std::size_t i = 0; i < x.modes.size(); ++i)
    if (x.modes[i].extent != y.modes[i].extent || x.modes[i].stride != y.modes[i].stride) return false;
  return true;
}

// Whether delta = sum_{j <= i} k_j * stride_j + t with |k_j| < extent_j and |t| < width (modes 0..i).
bool difference_reachable(const Block& b, int i, __int128 delta) {
  if (i < 0) return delta > -static_cast<__int128>(b.width) && delta < static_cast<__int128>(b.width);
  const Mode& m = b.modes[static_cast<std::size_t>(i)];
  const __int128 s = m.stride;
  __int128 k = delta / s;
  if (delta % s != 0 && delta < 0) --k;  // floor
  for (const __int128 c : {k, k + 1})
    if (c > -static_cast<__int128>(m.extent) && c < static_cast<__int128>(m.extent) &&
        difference_reachable(b, i - 1, delta - c * s))
      return true;
  return false;
}

// The general search: split the block whose outermost mode spans more, over the indices whose sub-blocks meet the
// other's span. `budget`: sub-blocks left to look at (0: gave up).
std::optional<bool> meet(const Block& x, const Block& y, uint64_t& budget) {
  const uint64_t x_end = x.base + x.span(), y_end = y.base + y.span();
  if (x_end <= y.base || y_end <= x.base) return false;
  if (x.modes.empty() && y.modes.empty()) return true;  // two runs whose spans meet
  if (budget == 0) return std::nullopt;
  --budget;
  const bool split_x =
      y.modes.empty() ||
      (!x.modes.empty() && (x.modes.back().extent - 1) * x.modes.back().stride >=
                               (y.modes.back().extent - 1) * y.modes.back().stride);
  const Block& big = split_x ? x : y;
  const Block& other = split_x ? y : x;
  Block inner = big;
  const Mode outer = inner.modes.back();
  inner.modes.pop_back();
  const uint64_t inner_span = inner.span(), lo = other.base, hi = other.base + other.span();
  // Indices k whose sub-block [base + k*stride, base + k*stride + inner_span) meets [lo, hi).
  const uint64_t first = lo + 1 > big.base + inner_span ? (lo + 1 - inner_span - big.base + outer.stride - 1) / outer.stride : 0;
  const uint64_t last = hi > big.base ? std::min<uint64_t>((hi - 1 - big.base) / outer.stride, outer.extent - 1) : 0;
  bool unsure = false;
  for (uint64_t k = first; k <= last && k < outer.extent; ++k) {
    inner.base = big.base + k * outer.stride;
    const std::optional<bool> r = split_x ? meet(inner, other, budget) : meet(other, inner, budget);
    if (r && *r) return true;
    if (!r) unsure = true;
    if (budget == 0) return std::nullopt;
  }
  if (unsure) return std::nullopt;
  return false;
}

}  // namespace

std::optional<bool> maps_share_bytes(const EncodeArgs& a, const EncodeArgs& b) {
  const std::optional<Block> x = block_of(a), y = block_of(b);
  if (!x || !y) return a.address == b.address && a.address != 0 ? std::optional<bool>(true) : std::nullopt;
  if (x->base + x->span() <= y->base || y->base + y->span() <= x->base) return false;
  if (x->base == y->base) return true;  // both hold the byte at their base
  if (same_modes(*x, *y))
    return difference_reachable(*x, static_cast<int>(x->modes.size()) - 1,
                                static_cast<__int128>(y->base) - static_cast<__int128>(x->base));
  constexpr uint64_t kBudget = 1 << 16;  // sub-blocks: a few milliseconds at worst, once per new pair of maps
  uint64_t budget = kBudget;
  return meet(*x, *y, budget);
}

}  // namespace tmaguard
