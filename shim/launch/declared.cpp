// tmaguard shim: the calling thread's declared tensors (declared.h).
#include "launch/declared.h"

#include <fmt/format.h>

#include <cstring>

#include "thread/reentry.h"
#include "memo/memo.h"

namespace tmaguard {
namespace {

struct DeclaredThread {
  DeclaredTensor tensors[kMaxDeclared];
  uint64_t seeds[kMaxDeclared + 1];  // seeds[i]: the seed of the first i tensors (seeds[0] = 0: none)
  std::size_t count;
};
thread_local DeclaredThread t_declared __attribute__((tls_model("initial-exec")));

// One 64-bit word into a running hash (a multiply and two shifts: the fields of a tensor are a few dozen words).
inline uint64_t fold(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 31);
}

// The seed of the first i+1 tensors from that of the first i: tensor i's fields, word by word, never the struct's
// bytes (its padding holds whatever the caller's stack held, and equal declarations must give equal seeds); the name
// up to its NUL, as whole words. Never 0 (0: no declarations).
uint64_t next_seed(uint64_t before, const DeclaredTensor& t) {
  uint64_t h = fold(before ^ 0x6a09e667f3bcc908ULL, t.data);
  uint64_t words[kDeclaredNameBytes / 8] = {};
  std::memcpy(words, t.name, strnlen(t.name, kDeclaredNameBytes));
  for (uint64_t w : words) h = fold(h, w);
  h = fold(h, static_cast<uint64_t>(static_cast<uint32_t>(t.rank)) << 32 | t.element_size);
  for (int j = 0; j < t.rank; ++j)
    h = fold(fold(h, static_cast<uint64_t>(t.shape[j])), static_cast<uint64_t>(t.strides[j]));
  return h | 1;
}

static_assert(kDeclaredNameBytes % 8 == 0);

// The thread's declarations changed since `before_seed`: its memo entries were made with the old seed, and their
// byte copies do not hold it, so they go.
void settle(uint64_t before_seed) {
  if (t_declared.seeds[t_declared.count] == before_seed) return;
  const InsideTmaguard inside;
  invalidate_this_threads_entries();
}

}  // namespace

DeclaredSet declared_tensors() { return {t_declared.tensors, t_declared.count}; }

uint64_t declared_seed() { return t_declared.seeds[t_declared.count]; }

std::size_t declared_depth() { return t_declared.count; }

DeclarationBatch::DeclarationBatch() : seed_before_(declared_seed()) {}

DeclarationBatch::~DeclarationBatch() { settle(seed_before_); }

std::string DeclarationBatch::add(const DeclaredTensor& t) {
  if (std::string why = declaration_problem(t); !why.empty()) return why;
  DeclaredThread& d = t_declared;
  if (d.count == kMaxDeclared)
    return fmt::format("the thread already declares {} tensors (end the declaration first)", kMaxDeclared);
  const InsideTmaguard inside;  // a signal handler that launches meanwhile is counted, not checked on half a table
  d.tensors[d.count] = t;
  d.seeds[d.count + 1] = next_seed(d.seeds[d.count], t);
  ++d.count;
  return "";
}

void end_declarations_to(std::size_t depth) {
  DeclaredThread& d = t_declared;
  if (depth >= d.count) return;
  const uint64_t before = declared_seed();
  {
    const InsideTmaguard inside;
    d.count = depth;
  }
  settle(before);
}

}  // namespace tmaguard
