// tmaguard shim: the tensors the calling thread declared (include/tmaguard/declare.h, the Python helper's
// tmaguard.declared), read by its launches' full check. Per thread, bounded (kMaxDeclared), no lock: only the thread
// writes its table, and only its own launches read it. Declarations stack: a block declares some on entry and ends
// at its entry's depth on exit, which restores the outer block's declarations (and their seed) at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tmaguard/tensor_match.h"

namespace tmaguard {

inline constexpr std::size_t kMaxDeclared = 16;

//! This thread's declared tensors, in the order declared.
struct DeclaredSet {
  const DeclaredTensor* tensors = nullptr;
  std::size_t count = 0;
  bool empty() const { return count == 0; }
};
DeclaredSet declared_tensors();

//! What the thread's declarations are, as a number that changes with them (0: none): it seeds the thread's launch
//! keys (memo.h), so that maps found clean against one set of tensors are judged again against another.
uint64_t declared_seed();

//! How many tensors the thread declares now: the depth a block returns to on exit.
std::size_t declared_depth();
//! Ends the declarations made after the thread had `depth` of them (all of them: 0).
void end_declarations_to(std::size_t depth);

//! Adds tensors to the thread's declarations, one by one, and tells the memo once, when the batch ends (the thread's
//! memo entries go if the declarations changed).
class DeclarationBatch {
 public:
  DeclarationBatch();
  ~DeclarationBatch();
  DeclarationBatch(const DeclarationBatch&) = delete;
  DeclarationBatch& operator=(const DeclarationBatch&) = delete;
  //! "" when `t` was declared, else why not: the table is full, or the declaration itself is wrong (tensor_match.h's
  //! declaration_problem).
  std::string add(const DeclaredTensor& t);

 private:
  uint64_t seed_before_;
};

}  // namespace tmaguard
