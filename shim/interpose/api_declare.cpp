// tmaguard shim: the exported functions of include/tmaguard/declare.h (tmaguard's own API, not a driver entry point:
// listed in shim/interpose/api.def, exported beside the wrappers). They touch only the calling thread's table
// (launch/declared.h) and never fail a caller: a refused declaration returns -1 and is said once per kind of problem.
#include <cstdint>
#include <cstring>
#include <string>

#include "launch/declared.h"
#include "report/reporter.h"
#include "runtime/runtime.h"
#define TMAGUARD_DEFINES_API
#include "tmaguard/declare.h"

namespace tmaguard {
namespace {

// `kind`: said once per kind of problem.
int refuse(const char* kind, const char* name, const std::string& why) {
  try {
    const std::string who = name ? std::string(name, strnlen(name, kDeclaredNameBytes - 1)) : std::string("(null)");
    report_notice(Notice::kDeclarationRefused, kind,
                  "tmaguard_declare_tensor(\"" + who + "\") refused: " + why +
                      "; maps into it are judged as if it were not declared");
  } catch (...) {
  }
  return -1;
}

}  // namespace
}  // namespace tmaguard

static_assert(TMAGUARD_MAX_DECLARED == tmaguard::kMaxDeclared && TMAGUARD_MAX_RANK == tmaguard::kMaxDeclaredRank);

extern "C" __attribute__((visibility("default"))) int tmaguard_declare_tensor(const char* name, const void* data,
                                                                               int rank, const int64_t* shape,
                                                                               const int64_t* strides,
                                                                               int element_size) {
  using namespace tmaguard;
  if (!armed()) return 0;  // tmaguard stepped aside (or is off): nothing is judged, nothing to refuse
  if (!name || (rank > 0 && (!shape || !strides)))
    return refuse("null", name, "a NULL name, shape or strides");
  if (rank < 0 || rank > kMaxDeclaredRank)
    return refuse("rank", name, "rank " + std::to_string(rank) + " (at most " + std::to_string(kMaxDeclaredRank) + ")");
  DeclaredTensor t;
  std::strncpy(t.name, name, kDeclaredNameBytes - 1);
  t.data = reinterpret_cast<uintptr_t>(data);
  t.rank = rank;
  for (int j = 0; j < rank; ++j) t.shape[j] = shape[j], t.strides[j] = strides[j];
  t.element_size = element_size > 0 ? static_cast<uint32_t>(element_size) : 0;
  const std::string why = declare_tensor(t);
  return why.empty() ? 0 : refuse("values", name, why);
}

extern "C" __attribute__((visibility("default"))) void tmaguard_end_declaration(void) {
  tmaguard::end_declarations();
}
