// The thread room's re-entry guard, without a process: a wrapper's scope nests, a thread of tmaguard's own is inside
// for its whole life, and the memo is not used from inside (a signal handler's launch must not meet a half-written
// entry).
#include <gtest/gtest.h>

#include <thread>

#include "thread/reentry.h"
#include "runtime/runtime.h"

namespace tmaguard {
namespace {

TEST(Reentry, ScopesNestAndEndWhereTheyBegan) {
  ASSERT_FALSE(inside_tmaguard());
  {
    const InsideTmaguard outer;
    EXPECT_FALSE(outer.nested());
    EXPECT_TRUE(inside_tmaguard());
    EXPECT_TRUE(InsideTmaguard::outermost());
    {
      const HookScope wrapper;  // a wrapper entered from inside: it passes through
      EXPECT_TRUE(wrapper.nested());
      EXPECT_FALSE(InsideTmaguard::outermost());
    }
    EXPECT_TRUE(InsideTmaguard::outermost());
  }
  EXPECT_FALSE(inside_tmaguard());
  const HookScope wrapper;
  EXPECT_FALSE(wrapper.nested()) << "a wrapper entered from the job's own code is not nested";
}

TEST(Reentry, AThreadOfTmaguardsOwnIsInsideForItsWholeLife) {
  bool inside = false, nested = false;
  std::thread([&] {
    become_tmaguard_thread("tmaguard-test");
    inside = inside_tmaguard();
    const HookScope wrapper;
    nested = wrapper.nested();
  }).join();
  EXPECT_TRUE(inside);
  EXPECT_TRUE(nested) << "a wrapper called from tmaguard's own thread must pass straight through";
  EXPECT_FALSE(inside_tmaguard()) << "another thread's guard leaked into this one";
}

}  // namespace
}  // namespace tmaguard
