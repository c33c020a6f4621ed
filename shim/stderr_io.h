// tmaguard shim: tmaguard's own lines on the job's stderr, outside the reporter, and whole writes to a descriptor.
#pragma once

#include <cstddef>
#include <string>

namespace tmaguard {

//! tmaguard cannot work: says so once, in one line, on stderr, then steps aside for good.
void report_cannot_work(const std::string& why);
//! Writes all of [p, p + n) to fd (false when the descriptor refuses it), with SIGPIPE blocked for the write: a
//! reader that went away must not kill the job.
bool write_whole(int fd, const char* p, std::size_t n);
//! Remembers which file the process's stderr (descriptor 2) is, the first time tmaguard is called: a job that later
//! closes descriptor 2 and opens a data file (which gets descriptor 2) must not find tmaguard's records in its data.
void note_process_stderr();
//! Writes text to that stderr; false (nothing written) when descriptor 2 is closed or names another file now.
bool write_stderr(const std::string& text);
//! One line on stderr, written whole (tmaguard's own warnings before or outside the reporter).
void write_stderr_line(const std::string& line);

//! Whether tmaguard said it cannot work (it then stepped aside for good).
bool cannot_work_said();

}  // namespace tmaguard
