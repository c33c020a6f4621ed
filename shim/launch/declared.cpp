// tmaguard shim: the calling thread's declared tensors (declared.h).
#include "launch/declared.h"

#include <fmt/format.h>

#include <cstring>

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

// FNV-1a over `n` bytes, continuing from `h`.
uint64_t fold_bytes(uint64_t h, const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (std::size_t b = 0; b < n; ++b) h = (h ^ p[b]) * 0x100000001b3ULL;
  return h;
}

// The seed of the thread's declarations: a hash of every tensor's fields, in order (0 only when none). Field by
// field, never the struct's bytes: its padding holds whatever the caller's stack held, and equal declarations must
// give equal seeds.
uint64_t seed_of(const DeclaredThread& d) {
  if (d.count == 0) return 0;
  uint64_t h = 0x6a09e667f3bcc908ULL;
  for (std::size_t i = 0; i < d.count; ++i) {
    const DeclaredTensor& t = d.tensors[i];
    h = fold_bytes(h, t.name, strnlen(t.name, kDeclaredNameBytes));
    h = fold_bytes(h, &t.data, sizeof t.data);
    h = fold_bytes(h, &t.rank, sizeof t.rank);
    h = fold_bytes(h, t.shape.data(), sizeof(int64_t) * static_cast<std::size_t>(t.rank));
    h = fold_bytes(h, t.strides.data(), sizeof(int64_t) * static_cast<std::size_t>(t.rank));
    h = fold_bytes(h, &t.element_size, sizeof t.element_size);
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
  d.tensors[d.count++] = t;
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
