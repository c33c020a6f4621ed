/* tmaguard: declaring the tensors a call hands to its kernels, so that tmaguard judges every tensor map that points
 * into one against the tensor itself (a map built from a view's shape as if it were contiguous describes the wrong
 * memory, and nothing in the map alone shows it). C and C++; no link dependency: the functions are weak, so a
 * program built with this header runs unchanged without tmaguard (tmaguard_declare() is then a no-op).
 *
 *   tmaguard_declare("q", q.data_ptr(), 4, shape, strides, 2);   // strides in elements, as tensor.stride()
 *   ... launches ...
 *   tmaguard_end_declaration();
 *
 * A declaration holds for the calling thread until tmaguard_end_declaration(); at most TMAGUARD_MAX_DECLARED tensors
 * of rank TMAGUARD_MAX_RANK or less at a time; a name is kept to 31 bytes. */
#ifndef TMAGUARD_DECLARE_H
#define TMAGUARD_DECLARE_H

#include <stdint.h>

#define TMAGUARD_MAX_DECLARED 16
#define TMAGUARD_MAX_RANK 8

#ifdef TMAGUARD_DEFINES_API /* the library itself: its definitions are strong */
#define TMAGUARD_WEAK
#else
#define TMAGUARD_WEAK __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Declares a tensor for the calling thread. Returns 0 when it was declared; -1 when it was refused (a NULL name or
 * array, a rank over TMAGUARD_MAX_RANK, a negative extent or stride, an element size of 0 or over 16, or the thread's
 * table full), which tmaguard says once per kind of problem; the launch is then judged as if undeclared. */
int tmaguard_declare_tensor(const char* name, const void* data, int rank, const int64_t* shape, const int64_t* strides,
                            int element_size) TMAGUARD_WEAK;
/* Ends the calling thread's declarations (all of them). */
void tmaguard_end_declaration(void) TMAGUARD_WEAK;

#ifndef TMAGUARD_DEFINES_API
/* The same, as no-ops when tmaguard is not loaded. */
static inline int tmaguard_declare(const char* name, const void* data, int rank, const int64_t* shape,
                                   const int64_t* strides, int element_size) {
  return tmaguard_declare_tensor ? tmaguard_declare_tensor(name, data, rank, shape, strides, element_size) : 0;
}
static inline void tmaguard_end(void) {
  if (tmaguard_end_declaration) tmaguard_end_declaration();
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* TMAGUARD_DECLARE_H */
