// The callsite room's Python frames, without Python: what a process without an interpreter pays for asking.
#include <link.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "callsite/python_frames.h"

namespace tmaguard {
namespace {

std::atomic<bool> g_holding{false}, g_release{false};

// Holds the loader's lock (dl_iterate_phdr takes it around its callbacks) until released.
int hold_loader_lock(dl_phdr_info*, std::size_t, void*) {
  g_holding = true;
  while (!g_release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 1;
}

// Asks again while another thread holds the loader's lock, soon after a first look; true when the second look
// answered within half the window (it did not wait for the lock). False in `valid` when the setup itself took too long
// for the window to still be open.
bool second_look_answers(bool* valid) {
  g_holding = false;
  g_release = false;
  RawPython raw;
  std::this_thread::sleep_for(std::chrono::milliseconds(kPythonRelookMs + 5));  // any earlier window is over
  const auto first = std::chrono::steady_clock::now();
  read_python_raw(raw, true);  // a look now: the next kPythonRelookMs need none
  std::thread holder([] { dl_iterate_phdr(hold_loader_lock, nullptr); });
  while (!g_holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  *valid = std::chrono::steady_clock::now() - first < std::chrono::milliseconds(kPythonRelookMs / 4);
  auto again = std::async(std::launch::async, [] {
    RawPython r;
    read_python_raw(r, true);
    return r.note != nullptr;
  });
  const bool answered = again.wait_for(std::chrono::milliseconds(kPythonRelookMs / 2)) == std::future_status::ready;
  g_release = true;
  holder.join();
  return again.get() && answered;
}

// The device audit takes a call site at every audited launch; in a process without Python, its look for an
// interpreter asks the loader (under the loader's lock) at most every kPythonRelookMs, not every time.
TEST(PythonFrames, WithoutPythonARecentLookDoesNotAskTheLoaderAgain) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool valid = false;
    const bool answered = second_look_answers(&valid);
    if (!valid) continue;  // a machine too busy to set up within the window: try again
    EXPECT_TRUE(answered) << "a second look within " << kPythonRelookMs << " ms waited for the loader's lock";
    return;
  }
  ADD_FAILURE() << "could not set up a second look within " << kPythonRelookMs / 4 << " ms in 5 attempts";
}

}  // namespace
}  // namespace tmaguard
