// tmaguard shim: the exported functions of include/tmaguard/declare.h (tmaguard's own API, not a driver entry point:
// listed in shim/interpose/api.def, exported beside the wrappers). They touch only the calling thread's table
// (launch/declared.h) and never fail a caller: a refused declaration is said once per kind of problem and the maps
// into that tensor are judged as if it were not declared.
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
void refuse(const char* kind, const char* name, const std::string& why) {
  try {
    const std::string who = name ? std::string(name, strnlen(name, kDeclaredNameBytes - 1)) : std::string("(null)");
    report_notice(Notice::kDeclarationRefused, kind,
                  "tmaguard_declare_tensor(\"" + who + "\") refused: " + why +
                      "; maps into it are judged as if it were not declared");
  } catch (...) {
  }
}

// The caller's description as the table keeps it; false (said) when its pointers or rank cannot be read.
bool copy_in(const tmaguard_tensor& in, DeclaredTensor& t) {
  if (!in.name || (in.rank > 0 && (!in.shape || !in.strides))) {
    refuse("null", in.name, "a NULL name, shape or strides");
    return false;
  }
  if (in.rank < 0 || in.rank > kMaxDeclaredRank) {
    refuse("rank", in.name,
           "rank " + std::to_string(in.rank) + " (at most " + std::to_string(kMaxDeclaredRank) + ")");
    return false;
  }
  std::strncpy(t.name, in.name, kDeclaredNameBytes - 1);
  t.data = reinterpret_cast<uintptr_t>(in.data);
  t.rank = in.rank;
  for (int j = 0; j < in.rank; ++j) t.shape[j] = in.shape[j], t.strides[j] = in.strides[j];
  t.element_size = in.element_size > 0 ? static_cast<uint32_t>(in.element_size) : 0;
  return true;
}

}  // namespace
}  // namespace tmaguard

static_assert(TMAGUARD_MAX_DECLARED == tmaguard::kMaxDeclared && TMAGUARD_MAX_RANK == tmaguard::kMaxDeclaredRank);

extern "C" __attribute__((visibility("default"))) int tmaguard_declare_tensors(const tmaguard_tensor* tensors,
                                                                                int count, int* depth) {
  using namespace tmaguard;
  if (depth) *depth = static_cast<int>(declared_depth());
  if (!armed() || count <= 0) return 0;  // tmaguard stepped aside (or is off): nothing is judged, nothing to refuse
  if (!tensors) {
    refuse("null", nullptr, "a NULL array of tensors");
    return count;
  }
  int refused = 0;
  DeclarationBatch batch;
  for (int i = 0; i < count; ++i) {
    DeclaredTensor t;
    if (!copy_in(tensors[i], t)) {
      ++refused;
    } else if (std::string why = batch.add(t); !why.empty()) {
      refuse("values", t.name, why);
      ++refused;
    }
  }
  return refused;
}

extern "C" __attribute__((visibility("default"))) int tmaguard_declare_tensor(const char* name, const void* data,
                                                                               int rank, const int64_t* shape,
                                                                               const int64_t* strides,
                                                                               int element_size) {
  const tmaguard_tensor t{name, data, shape, strides, rank, element_size};
  return tmaguard_declare_tensors(&t, 1, nullptr) == 0 ? 0 : -1;
}

extern "C" __attribute__((visibility("default"))) void tmaguard_end_declaration_to(int depth) {
  tmaguard::end_declarations_to(depth > 0 ? static_cast<std::size_t>(depth) : 0);
}

extern "C" __attribute__((visibility("default"))) void tmaguard_end_declaration(void) {
  tmaguard::end_declarations_to(0);
}
