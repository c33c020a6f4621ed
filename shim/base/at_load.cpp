// tmaguard shim: the one thing tmaguard does when the library is loaded, before the job's main(): it notes what the
// job could change before its first CUDA call and what must be known as it was then: the identity of descriptor 2
// (a job that closes stderr and opens its own file there must never get tmaguard's lines in that file) and the
// working directory (relative paths in the settings name files where the job was started). No CUDA call, no symbol
// walk, no allocation, no thread: a process that never touches CUDA pays a few system calls (fstat, fcntl, statx, getcwd).
#include "base/settings.h"
#include "base/stderr_io.h"

namespace tmaguard {
namespace {

__attribute__((constructor)) void tmaguard_note_at_load() {
  note_process_stderr();
  note_load_directory();
}

}  // namespace
}  // namespace tmaguard
