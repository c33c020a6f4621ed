// tmaguard shim: what tmaguard says about an encode (cuTensorMapEncode*): the policy of the encode wrappers
// (interpose/hooks_encode.cpp), which only gather the arguments. An encode's return code is never changed: these are
// notices, each said once per process and kind, so that a job that encodes thousands of maps gets one line.
#pragma once

#include "driver/cuda_names.h"
#include "driver/provenance.h"
#include "tmaguard/descriptor_checks.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

//! An encode the driver accepted, whose bytes are new to this process (provenance: its entry point recorded): warns
//! about arguments the driver accepts but that are almost certainly bugs (a NULL address, a zero stride, rows that
//! overlap, an address the driver did not allocate, a map past the end of its allocation).
void note_encode_accepted(EncodeApi api, const CUtensorMap& map, const EncodeArgs& args);
//! An encode the driver refused with CUDA_ERROR_INVALID_VALUE (or another code `rc`): says in one line which
//! documented requirement the arguments break.
void note_encode_refused(EncodeApi api, CUresult rc, const EncodeArgs& args);
//! TMAGUARD_REPAIR=large-tensor-flag: clears bit 85 of a map the driver just encoded when it carries the flag over a
//! tensor spanning under 128 KiB on a platform NVIDIA's release notes name (`arch`: the current device and driver),
//! exactly as CUTLASS 4.3.4 does after its encode; counts it and says so once. Never on any other map or platform.
void repair_large_flag(EncodeApi api, CUtensorMap* map, const Arch& arch);

}  // namespace tmaguard
