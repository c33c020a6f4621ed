// tmaguard shim: what tmaguard says about an encode (cuTensorMapEncode*): the policy of the encode wrappers
// (interpose/hooks_encode.cpp), which only gather the arguments. An encode's return code is never changed: these are
// notices, each said once per process and kind, so that a job that encodes thousands of maps gets one line.
#pragma once

#include "base/cuda_names.h"
#include "driver/provenance.h"
#include "tmaguard/tensormap.h"

namespace tmaguard {

//! An encode the driver accepted, whose bytes are new to this process (provenance: its entry point recorded): warns
//! about arguments the driver accepts but that are almost certainly bugs (a NULL address, a zero stride, rows that
//! overlap, an address the driver did not allocate, a map past the end of its allocation).
void note_encode_accepted(EncodeApi api, const CUtensorMap& map, const EncodeArgs& args);
//! An encode the driver refused with CUDA_ERROR_INVALID_VALUE (or another code `rc`): says in one line which
//! documented requirement the arguments break.
void note_encode_refused(EncodeApi api, CUresult rc, const EncodeArgs& args);

}  // namespace tmaguard
