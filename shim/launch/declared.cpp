// tmaguard shim: the calling thread's declared tensors (declared.h).
#include "launch/declared.h"

#include <fmt/format.h>

#include "base/hash_key.h"
#include "base/reentry.h"
#include "launch/memo.h"

namespace tmaguard {
namespace {

struct DeclaredThread {
  DeclaredTensor tensors[kMaxDeclared];
  std::size_t count;
  uint64_t seed;
};
thread_local DeclaredThread t_declared __attribute__((tls_model("initial-exec")));

// The seed of the thread's declarations: a hash of every tensor's bytes (0 only when none).
uint64_t seed_of(const DeclaredThread& d) {
  if (d.count == 0) return 0;
  uint64_t h = 0x6a09e667f3bcc908ULL;
  for (std::size_t i = 0; i < d.count; ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(&d.tensors[i]);
    for (std::size_t b = 0; b < sizeof(DeclaredTensor); ++b) h = (h ^ p[b]) * 0x100000001b3ULL;
  }
  return h | 1;
}

// The thread's declarations changed: its memo entries, whose clean keys were seeded with the old ones, go.
void changed(DeclaredThread& d) {
  const uint64_t seed = seed_of(d);
  if (seed == d.seed) return;
  d.seed = seed;
  forget_this_threads_entries();
}

}  // namespace

DeclaredSet declared_tensors() { return {t_declared.tensors, t_declared.count}; }

uint64_t declared_seed() { return t_declared.seed; }

std::string declare_tensor(const DeclaredTensor& t) {
  if (std::string why = declaration_problem(t); !why.empty()) return why;
  DeclaredThread& d = t_declared;
  if (d.count == kMaxDeclared)
    return fmt::format("the thread already declares {} tensors (end the declaration first)", kMaxDeclared);
  const InsideTmaguard inside;  // a signal handler that launches meanwhile is counted, not checked on half a table
  DeclaredTensor& slot = d.tensors[d.count];
  slot = t;
  for (int j = t.rank; j < kMaxDeclaredRank; ++j) slot.shape[j] = slot.strides[j] = 0;  // bytes past the rank: seed
  ++d.count;
  changed(d);
  return "";
}

void end_declarations() {
  DeclaredThread& d = t_declared;
  if (d.count == 0) return;
  const InsideTmaguard inside;
  d.count = 0;
  changed(d);
}

}  // namespace tmaguard
