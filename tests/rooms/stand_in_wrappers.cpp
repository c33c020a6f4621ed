// In libtmaguard.so every wrapped entry point is one of its own exported wrappers (interpose/), and the driver room
// knows their addresses (a "real" pointer that is tmaguard's own wrapper is refused). The rooms' unit tests link no
// wrapper: these stand-ins take their names, so that the real driver's functions (the stand-in driver's, found with
// dlsym on its handle) are never mistaken for tmaguard's. Never called.
#define TG_ENTRY(name, pfn, kind) \
  extern "C" __attribute__((visibility("default"), used)) void name() { __builtin_trap(); }
#define TG_REAL_ONLY(name, pfn)
#include "driver/entry_points.def"
