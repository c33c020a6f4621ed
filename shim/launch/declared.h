// tmaguard shim: the tensors the calling thread declared (include/tmaguard/declare.h, the Python helper's
// tmaguard.declared), read by its launches' full check. Per thread, bounded (kMaxDeclared), no lock: only the thread
// writes its table, and only its own launches read it.
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

//! Adds a tensor to the thread's declarations: "" when it did, else what is wrong with it (the table is full, or the
//! declaration itself: tensor_match.h's declaration_problem).
std::string declare_tensor(const DeclaredTensor& t);
//! Ends every declaration of the thread.
void end_declarations();

}  // namespace tmaguard
