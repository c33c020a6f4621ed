// Scenario large_flag: a map encoded through the (stand-in) driver's cuTensorMapEncodeTiled over a small tensor, then
// launched twice. With FAKECUDA_AFFECTED_BLACKWELL=1 the stand-in encodes the way NVIDIA's 595.71.05 release notes
// describe: the large-tensor flag (bit 85) set when the tensor spans under 128 KiB and is not dense.
//
//   TG_LARGE_TENSOR: padded (64 x 100 bf16 rows 256 bytes apart: 25,472 bytes, not dense; the default) | dense (rows
//                    128 bytes apart) | big (1,000 padded rows: 255,872 bytes)
#include <cstdlib>
#include <string>

#include "client.h"

namespace client {
namespace {

int large_flag() {
  const char* t = std::getenv("TG_LARGE_TENSOR");
  const std::string what = t ? t : "padded";
  const uint64_t rows = what == "big" ? 1000 : 100, pitch = what == "dense" ? 128 : 256;
  const Tensor tensor{0x7f0000000000ULL, {64, rows}, {pitch}};
  MapShape shape;
  shape.box = {64, 64};
  const Kernel k = make_kernel("blackwell_gemm_epilogue", {encode_map(tensor, shape)});
  launch(k);
  launch(k);
  return finish(ran(k));
}

}  // namespace

const std::vector<Scenario>& blackwell_scenarios() {
  static const std::vector<Scenario> s = {{"large_flag", large_flag}};
  return s;
}

}  // namespace client
