// What a page the process never used costs on this machine, the way tmaguard's arena (process/arena.h) meets it
// (shim/process/arena.h): a first write that faults it in; a madvise(MADV_POPULATE_WRITE) for many pages, and the
// first write after it; and a write after another thread populated and read the page. Prints
//   PAGE_COST fault_us=... populate_us=... write_after_populate_us=... write_after_other_thread_us=... rewrite_us=...
// (microseconds per 4 KiB page over N MiB, default 64). Asserts nothing.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

constexpr std::size_t kPage = 4096;

char* fresh(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) std::exit(2);
  return static_cast<char*>(p);
}

template <typename F>
double us_per_page(std::size_t bytes, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(bytes / kPage);
}

void write_pages(char* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += kPage) reinterpret_cast<volatile char*>(p)[i] = 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t bytes = (argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64) << 20;
  char* a = fresh(bytes);
  const double fault = us_per_page(bytes, [&] { write_pages(a, bytes); });
  const double rewrite = us_per_page(bytes, [&] { write_pages(a, bytes); });
  char* b = fresh(bytes);
  bool populated = true;
  const double populate = us_per_page(bytes, [&] { populated = madvise(b, bytes, MADV_POPULATE_WRITE) == 0; });
  const double after_populate = us_per_page(bytes, [&] { write_pages(b, bytes); });
  char* c = fresh(bytes);
  std::thread([&] {
    if (madvise(c, bytes, MADV_POPULATE_WRITE) != 0) populated = false;
    for (std::size_t i = 0; i < bytes; i += kPage) (void)reinterpret_cast<volatile char*>(c)[i];
  }).join();
  const double after_other = us_per_page(bytes, [&] { write_pages(c, bytes); });
  std::printf("PAGE_COST fault_us=%.2f populate_us=%.2f write_after_populate_us=%.2f write_after_other_thread_us=%.3f "
              "rewrite_us=%.3f populate_works=%d mib=%zu\n",
              fault, populate, after_populate, after_other, rewrite, populated ? 1 : 0, bytes >> 20);
  return 0;
}
