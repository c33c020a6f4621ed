// tmaguard shim: the one thing tmaguard does when the library is loaded, before the job's main(): it notes what the
// job could change before its first CUDA call and what must be known as it was then: the identity of descriptor 2
// (a job that closes stderr and opens its own file there must never get tmaguard's lines in that file) and the
// working directory (relative paths in the settings name files where the job was started); and it writes the start
// record where the log is a file (the proof, for a fleet, that the guard is in the process: one per process, also in
// one that never touches CUDA). No CUDA call, no symbol walk, no thread: the settings are read (the environment and
// the config file, if any), and a guarded process with a log file pays one open and one write.
#include "process/settings.h"
#include "process/stderr_io.h"
#include "report/reporter.h"

namespace tmaguard {
namespace {

__attribute__((constructor)) void tmaguard_note_at_load() {
  note_process_stderr();
  note_load_directory();
  try {
    write_start_record_at_load();
  } catch (...) {  // no memory at load: the start record is written when tmaguard arms, if it can be then
  }
}

}  // namespace
}  // namespace tmaguard
