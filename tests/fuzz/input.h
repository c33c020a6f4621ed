// A reader of fuzzer input: values of any width, taken from the front, zero once the input runs out.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

struct FuzzInput {
  const uint8_t* p;
  std::size_t n;
  template <typename T>
  T take() {
    T v{};
    const std::size_t k = n < sizeof(T) ? n : sizeof(T);
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
  std::string take_string(std::size_t max) {
    const std::size_t k = n < max ? n : max;
    std::string s(reinterpret_cast<const char*>(p), k);
    p += k;
    n -= k;
    return s;
  }
};
