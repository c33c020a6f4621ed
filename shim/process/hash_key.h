// tmaguard shim: the process's secret key for the content hashes that decide whether a launch may skip its check
// (the clean-launch memo's keys, the generic checks' map hashes). Drawn once, when tmaguard initialises, before any
// key is made; a forked child keeps its parent's (its memo is its parent's too).
#pragma once

#include "tmaguard/tensormap.h"

namespace tmaguard {

//! The key in force (all zero until initialisation draws it; nothing keyed is made before that).
extern HashKey g_hash_key;
//! Draws the key: getrandom(2), else the loader's AT_RANDOM bytes mixed with the clock and the pid.
void draw_hash_key();

}  // namespace tmaguard
