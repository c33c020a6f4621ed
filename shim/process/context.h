// tmaguard shim: what every record and every expanded path says about this process, made in one place: its context
// (pid, tid, rank, host, job, time) and what a path's % sequences stand for; and missing directories made as
// `mkdir -p` makes them.
#pragma once

#include <string>

#include "tmaguard/config.h"
#include "tmaguard/records.h"

namespace tmaguard {

//! The node's name (gethostname; "" when it cannot be read).
std::string host_name();
//! The calling thread's context now, from these settings.
ProcessContext process_context(const Config& cfg);
//! What %p %h %r %j stand for now (the pid changes in a forked child).
PathContext path_context(const Config& cfg);
//! Makes the missing directories above `path` (0755); stops at the first one it cannot make.
void make_parent_directories(const std::string& path);

}  // namespace tmaguard
