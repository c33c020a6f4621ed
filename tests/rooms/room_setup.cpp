// The rooms' unit tests run the library's own initialisation first, as the first call of a job into a wrapper does
// (the settings and the rules in force, the real driver found: here the stand-in, linked as libcuda.so.1), and the
// driver's cuInit, as the job's.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "runtime/runtime.h"

namespace {

class Armed : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_TRUE(tmaguard::armed()) << "tmaguard could not initialise";
    // The job's own cuInit, as a job makes it (the driver's, through its handle: this binary's cuInit is a
    // stand-in wrapper).
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    ASSERT_NE(driver, nullptr);
    auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(driver, "cuInit"));
    ASSERT_NE(init, nullptr);
    ASSERT_EQ(init(0), 0);
  }
};

const auto* const kArmed = ::testing::AddGlobalTestEnvironment(new Armed);

}  // namespace
