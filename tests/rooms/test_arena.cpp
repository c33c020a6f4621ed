// The process room's arena (where kernels' facts live), without a process: blocks taken in a FactsScope, given back,
// reused; the preparer thread; a forked child.
#include <dirent.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "process/arena.h"

namespace tmaguard {
namespace {

TEST(Arena, OutsideAScopeNothingComesFromIt) {
  EXPECT_EQ(facts_allocate(64), nullptr);
  auto* v = new std::vector<int>(100);
  EXPECT_FALSE(facts_owns(v->data()));
  EXPECT_FALSE(facts_owns(v));
  delete v;
  int on_stack = 0;
  EXPECT_FALSE(facts_free(&on_stack)) << "memory that is not the facts arena's was taken for its own";
  EXPECT_FALSE(facts_free(nullptr));
}

TEST(Arena, InAScopeBlocksComeFromItAlignedDistinctAndReusedBySize) {
  FactsScope scope;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (const std::size_t n : {0, 1, 15, 16, 17, 100, 384, 1000, 2048, 2064, 4095, 4096}) {
    void* p = facts_allocate(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(facts_owns(p)) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << n;
    std::memset(p, static_cast<int>(n & 0xff), n);
    blocks.emplace_back(p, n);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i)  // no block overlaps another: each still holds its own bytes
    for (std::size_t b = 0; b < blocks[i].second; ++b)
      ASSERT_EQ(static_cast<uint8_t*>(blocks[i].first)[b], blocks[i].second & 0xff) << "block of " << blocks[i].second;
  EXPECT_EQ(facts_allocate(kFactsLargest + 1), nullptr) << "a block over the largest size came from the facts arena";
  void* p = blocks[5].first;  // 100 bytes: the 112-byte size
  ASSERT_TRUE(facts_free(p));
  EXPECT_EQ(facts_allocate(105), p) << "a freed block was not reused for a block of its size";
  for (auto& [q, n] : blocks) EXPECT_TRUE(facts_free(q));
}

TEST(Arena, OperatorNewInAScopeTakesItsBlocksAndDeleteGivesThemBack) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer builds keep the sanitizer's operator new (arena.cpp)";
#endif
  const std::size_t before = facts_stats().in_use;
  std::string* s = nullptr;
  std::vector<int>* v = nullptr;
  {
    FactsScope scope;
    s = new std::string(200, 'x');
    v = new std::vector<int>(50, 7);
  }
  EXPECT_TRUE(facts_owns(s));
  EXPECT_TRUE(facts_owns(s->data()));
  EXPECT_TRUE(facts_owns(v->data()));
  EXPECT_GT(facts_stats().in_use, before);
  EXPECT_EQ(std::string(200, 'x'), *s);
  delete s;  // outside the scope: still given back to the facts arena
  delete v;
  EXPECT_EQ(facts_stats().in_use, before);
  FactsScope scope;
  auto big = std::make_unique<std::vector<char>>(kFactsLargest + 1);
  EXPECT_FALSE(facts_owns(big->data())) << "a block over the largest size came from the facts arena";
}

TEST(Arena, ThreadsAllocatingAtOnceNeverShareABlock) {
  const std::size_t before = facts_stats().in_use;
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &bad] {
      FactsScope scope;
      std::vector<std::pair<uint8_t*, std::size_t>> mine;
      for (int i = 0; i < 3000; ++i) {
        const std::size_t n = 16 + static_cast<std::size_t>((i * 37 + t * 101) % 1500);
        auto* p = static_cast<uint8_t*>(facts_allocate(n));
        if (!p) ++bad[t];
        if (!p) continue;
        std::memset(p, t + 1, n);
        mine.emplace_back(p, n);
        if (i % 3 == 0) {  // give some back as it goes
          for (std::size_t b = 0; b < mine.front().second; ++b) bad[t] += mine.front().first[b] != t + 1;
          facts_free(mine.front().first);
          mine.erase(mine.begin());
        }
      }
      for (auto& [p, n] : mine) {
        for (std::size_t b = 0; b < n; ++b) bad[t] += p[b] != t + 1;
        facts_free(p);
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t << " found another thread's bytes in its blocks";
  EXPECT_EQ(facts_stats().in_use, before);
}

// The policy of the thread named `name` in this process (-1: none).
int policy_of_thread(const std::string& name) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int policy = -1;
  while (dirent* e = readdir(d)) {
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string got;
    if (std::getline(comm, got) && got == name) policy = sched_getscheduler(std::atoi(e->d_name));
  }
  closedir(d);
  return policy;
}

TEST(Arena, ThePreparerKeepsSpansReadyOnATimeNoOtherThreadWants) {
  FactsScope scope;
  std::vector<void*> blocks;
  for (int i = 0; i < 300; ++i) blocks.push_back(facts_allocate(4096));  // 300 spans: the preparer is wanted
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (facts_stats().spans_ready == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const FactsStats s = facts_stats();
  EXPECT_GT(s.spans_prepared, 0u);
  EXPECT_GT(s.spans_ready, 0u) << "no span made ready in 10 s";
  EXPECT_EQ(policy_of_thread("tmaguard-facts"), SCHED_BATCH);
  blocks.push_back(facts_allocate(4096));
  EXPECT_GT(facts_stats().spans_ready_taken, s.spans_ready_taken) << "a span made ready was not taken";
  for (void* p : blocks) facts_free(p);
}

TEST(Arena, AForkedChildTakesAndGivesBackBlocks) {
  {
    FactsScope scope;
    facts_free(facts_allocate(64));  // the parent has used it (and may have a preparer)
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FactsScope scope;
    std::vector<void*> blocks;
    for (int i = 0; i < 600; ++i) {
      void* p = facts_allocate(4096);
      if (!p || !facts_owns(p)) _exit(2);
      std::memset(p, 1, 4096);
      blocks.push_back(p);
    }
    for (void* p : blocks)
      if (!facts_free(p)) _exit(3);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace tmaguard
