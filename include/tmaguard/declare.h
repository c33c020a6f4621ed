/* tmaguard: declaring the tensors a call hands to its kernels, so that tmaguard judges every tensor map that points
 * into one against the tensor itself (a map built from a view's shape as if it were contiguous describes the wrong
 * memory, and nothing in the map alone shows it). C and C++; no link dependency: the functions are weak, so a
 * program built with this header runs unchanged without tmaguard (tmaguard_declare() is then a no-op).
 *
 *   tmaguard_declare("q", q.data_ptr(), 4, shape, strides, 2);   // strides in elements, as tensor.stride()
 *   ... launches ...
 *   tmaguard_end_declaration();
 *
 * or, for a block of several (one call in, one out; blocks nest, the inner one's exit restores the outer one's):
 *
 *   tmaguard_tensor t[2] = {{"q", q_ptr, q_shape, q_strides, 4, 2}, {"out", o_ptr, o_shape, o_strides, 4, 2}};
 *   int depth = tmaguard_declare_many(t, 2);
 *   ... launches ...
 *   tmaguard_end_to(depth);
 *
 * A declaration holds for the calling thread until it is ended; at most TMAGUARD_MAX_DECLARED tensors of rank
 * TMAGUARD_MAX_RANK or less at a time; a name is kept to 31 bytes. */
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

/* A tensor as declared: shape and strides in elements (rank of each), element size in bytes. */
typedef struct tmaguard_tensor {
  const char* name;
  const void* data;
  const int64_t* shape;
  const int64_t* strides;
  int rank;
  int element_size;
} tmaguard_tensor;

/* Declares a tensor for the calling thread. Returns 0 when it was declared; -1 when it was refused (a NULL name or
 * array, a rank over TMAGUARD_MAX_RANK, a negative extent or stride, an element size of 0 or over 16, or the thread's
 * table full), which tmaguard says once per kind of problem; the launch is then judged as if undeclared. */
int tmaguard_declare_tensor(const char* name, const void* data, int rank, const int64_t* shape, const int64_t* strides,
                            int element_size) TMAGUARD_WEAK;
/* Declares `count` tensors for the calling thread, in order, as tmaguard_declare_tensor() each. Returns how many were
 * refused (0: all declared); sets *depth (when not NULL) to how many the thread declared before the call: the depth
 * tmaguard_end_declaration_to() returns to. */
int tmaguard_declare_tensors(const tmaguard_tensor* tensors, int count, int* depth) TMAGUARD_WEAK;
/* Ends the calling thread's declarations made since it declared `depth` tensors (the rest stay declared). */
void tmaguard_end_declaration_to(int depth) TMAGUARD_WEAK;
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
/* A block's entry: declares `count` tensors, returns the depth to end at. */
static inline int tmaguard_declare_many(const tmaguard_tensor* tensors, int count) {
  int depth = 0;
  if (tmaguard_declare_tensors) tmaguard_declare_tensors(tensors, count, &depth);
  return depth;
}
/* A block's exit: the declarations return to what they were at its entry. */
static inline void tmaguard_end_to(int depth) {
  if (tmaguard_end_declaration_to) tmaguard_end_declaration_to(depth);
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* TMAGUARD_DECLARE_H */
