// A library whose caller function is named only by its file's static symbol table (.symtab): built twice, a long
// build (TG_HIDDEN_BIG: a large table of data pushes .symtab far into the file) and a short one, for the test of a
// library replaced under its call sites (scenarios_loopholes.cpp: replaced_library).
#include <cstddef>

#ifdef TG_HIDDEN_BIG
#define TG_CALLER hidden_caller_in_big_build
extern "C" __attribute__((used)) const unsigned char tg_hidden_padding[4 << 20] = {1};
#else
#define TG_CALLER hidden_caller_in_small_build
#endif

namespace {
// Calls back into the job, which launches: this frame sits between the launch and tg_hidden_run.
__attribute__((noinline)) int TG_CALLER(int (*cb)()) {
  const int r = cb();
  asm volatile("" ::: "memory");  // no tail call: this frame stays on the stack during the launch
  return r + 1;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int tg_hidden_run(int (*cb)()) { return TG_CALLER(cb) - 1; }
