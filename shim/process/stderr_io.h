// tmaguard shim: tmaguard's own lines on the job's stderr, outside the reporter, and whole writes to a descriptor.
#pragma once

#include <cstddef>
#include <string>

#include "tmaguard/records.h"

namespace tmaguard {

//! Writes all of [p, p + n) to fd (false when the descriptor refuses it), with SIGPIPE blocked for the write: a
//! reader that went away must not kill the job.
bool write_whole(int fd, const char* p, std::size_t n);
//! Writes [p, p + n) to fd within `timeout_ms` (false when the descriptor refuses it or is not writable in time): in
//! pieces of PIPE_BUF bytes, each after poll() says the descriptor takes it, so a reader that stopped reading cannot
//! hold the caller. For writes a launch, a fork or an exit waits on.
bool write_bounded(int fd, const char* p, std::size_t n, int timeout_ms);
//! Remembers which file the process's stderr (descriptor 2) is, when the library loads (runtime/at_load.cpp): a job that later
//! closes descriptor 2 and opens a data file (which gets descriptor 2) must not find tmaguard's records in its data.
//! A descriptor 2 that is already such a file then (it has close-on-exec set, or it is a regular file created more
//! than a second after the process started) is not taken for stderr at all: nothing is ever written to it.
void note_process_stderr();
//! Why tmaguard writes nothing to descriptor 2 (closed, or not the process's own stderr), or nullptr when it does.
const char* stderr_unusable();
//! Writes text to that stderr (blocking); false (nothing written) when descriptor 2 is closed or names another file.
bool write_stderr(const std::string& text);
//! The same within `timeout_ms` (write_bounded).
bool write_stderr_bounded(const std::string& text, int timeout_ms);
inline constexpr int kStderrLineTimeoutMs = 2000;
//! One line on stderr (tmaguard's own warnings before or outside the reporter), written within
//! kStderrLineTimeoutMs. With TMAGUARD_LOG_FORMAT=json it is a JSON record of this kind of notice (the line without
//! its "tmaguard: " as its message and body; its event and severity from notices.inc), like every other line.
void write_stderr_line(const std::string& line, Notice kind = Notice::kStderrWarning);

}  // namespace tmaguard
