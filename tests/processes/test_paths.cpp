// Real processes with libtmaguard.so preloaded in front of the stand-in driver: every resolution path x every launch
// entry point, CUkernel handles, the extra form, the fast path, cuGetProcAddress and dlsym semantics.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "client_run.h"

namespace {

// ---- every path x every entry point: clean FA4 launch runs silently, bad dK is stopped (abort mode)
struct PathEntry {
  std::string path, entry;
  bool linked;
};
std::vector<PathEntry> all_paths() {
  std::vector<PathEntry> v;
  for (const char* e : {"launch", "launch_ptsz", "ex", "ex_ptsz", "coop", "coop_ptsz"}) {
    v.push_back({"direct", e, true});
    for (const char* p : {"dlsym", "getproc", "getproc_self", "getproc_legacy"}) v.push_back({p, e, false});
  }
  return v;
}
class Paths : public ::testing::TestWithParam<PathEntry> {};

// The launch entries are thunks that save and restore the caller's registers around the memo's look: every argument
// (grid, block, shared bytes, stream, kernelParams, extra, the config) must reach the driver as the caller passed it,
// on a kernel's first launch (the full check) and on its repeats (the memo), with maps and without.
TEST_P(Paths, EveryLaunchArgumentReachesTheDriverUnchanged) {
  const auto& pe = GetParam();
  const ClientRun r = run_client({pe.path, pe.entry, "launch_arguments"}, {}, pe.linked);
  ASSERT_NE(r.p.out.find("ARGUMENTS checked=40 "), std::string::npos) << describe(r);
  EXPECT_NE(r.p.out.find("ARGUMENTS checked=40 wrong=0"), std::string::npos) << describe(r);
  EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  // The memo saw the same arguments: the repeats of the two kernels with maps passed by the compare with one copy
  // each (a memo handed other memory than kernelParams sends every repeat on, and each renews the copy).
  ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["clean_copies"], 2) << describe(r);
}

TEST_P(Paths, CleanFa4LaunchRunsWithoutReport) {
  const auto& pe = GetParam();
  const ClientRun r = run_client({pe.path, pe.entry, "fa4_ok"}, {}, pe.linked);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3) << describe(r);
  EXPECT_EQ(r.via, 3) << "every launch must reach the driver entry point asked for (_ptsz included)\n" << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  EXPECT_TRUE(r.events("encode-warning").empty()) << "healthy FA4 maps (strides not increasing) draw no warning\n"
                                                  << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u) << describe(r);
  EXPECT_EQ(s[0]["launches_seen"], 3) << "the launches must have gone through tmaguard\n" << describe(r);
  EXPECT_EQ(s[0]["tensor_maps_decoded"], 6) << "decoded once, then cached by content\n" << describe(r);
}

TEST_P(Paths, BadDkAbortsBeforeTheKernelRuns) {
  const auto& pe = GetParam();
  const ClientRun r = run_client({pe.path, pe.entry, "fa4_dk_bad"}, {}, pe.linked);
  ASSERT_TRUE(r.p.signaled) << describe(r);
  EXPECT_EQ(r.p.signal, SIGABRT);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_EQ(v[0]["rule"], "fa4-dk-not-k-major");
  EXPECT_EQ(v[0]["action"], "abort");
  EXPECT_EQ(r.events("summary").size(), 1u);
  EXPECT_EQ(r.p.out.find("RESULT"), std::string::npos) << "the process must not get past the launch";
}

INSTANTIATE_TEST_SUITE_P(AllPathsAllEntries, Paths, ::testing::ValuesIn(all_paths()),
                         [](const auto& info) { return info.param.path + "_" + info.param.entry; });

// ---- handles and launch forms
TEST(Handles, CuKernelHandlesAndExtraBuffers) {
  for (const char* entry : {"launch", "ex_ptsz"}) {
    const ClientRun r =
        run_client({"getproc", entry, "fa4_dk_bad", "--cukernel", "--extra"}, {{"TMAGUARD_MODE", "reject"}});
    ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
    EXPECT_EQ(r.events("violation")[0]["param_index"], 7);
    EXPECT_EQ(r.ran, 0);
    const ClientRun ok = run_client({"getproc", entry, "fa4_ok", "--cukernel", "--extra"});
    EXPECT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
    EXPECT_EQ(ok.ran, 3);
  }
}

TEST(FastPath, DescriptorRewrittenInPlaceIsCaughtAfterCleanLaunches) {
  for (const char* sc : {"fa4_mutated_in_place", "fa4_2cta_mutated_in_place"}) {
    for (const char* entry : {"launch", "ex_ptsz"}) {
      const ClientRun r = run_client({"getproc", entry, sc}, {{"TMAGUARD_MODE", "reject"}});
      EXPECT_EQ(r.failed, 1) << sc << " " << entry << "\n" << describe(r);
      EXPECT_EQ(r.ran, 10) << sc << " " << entry;
      ASSERT_EQ(r.events("violation").size(), 1u) << sc << " " << entry << "\n" << describe(r);
      EXPECT_EQ(r.events("violation")[0]["rule"], "fa4-dk-not-k-major");
      const auto s = r.events("summary");
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0]["launches_seen"], 11);
      EXPECT_EQ(s[0]["launches_checked"], 11);
    }
  }
}

// The fast path knows a launch as clean by its maps' bytes or by its key (the same kernel on each layer's tensors):
// a transposed dK on one layer, between clean launches of the others, is stopped. The first two layers' maps are
// decoded once (the second is what the kernel's moved maps are compiled from: judge.h, MovedMaps); every other
// layer's are theirs moved, judged by their addresses, once per layer.
TEST(FastPath, OneKernelPerLayerCheckedOnceAndABadLayerCaught) {
  for (const char* entry : {"launch", "ex_ptsz"}) {
    const ClientRun r = run_client({"getproc", entry, "fa4_layers"}, {{"TMAGUARD_MODE", "reject"}});
    EXPECT_EQ(r.failed, 1) << entry << "\n" << describe(r);
    EXPECT_EQ(r.ran, 30) << entry;
    ASSERT_EQ(r.events("violation").size(), 1u) << entry << "\n" << describe(r);
    EXPECT_EQ(r.events("violation")[0]["rule"], "fa4-dk-not-k-major");
    const auto s = r.events("summary");
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0]["launches_checked"], 31);
    EXPECT_EQ(s[0]["tensor_maps_decoded"], 2 * 6 + 6) << "the first two layers once, and the bad launch";
    EXPECT_EQ(s[0]["launches_moved"], 4) << "every other layer once";
  }
}

// The thread's copy of a clean launch (the byte compare's reference) is not renewed while a kernel goes from layer
// to layer, and renewed once when it settles on one layer's tensors: else every later repeat would be known only by
// its key (a hash) for the life of the thread.
TEST(FastPath, CleanCopyRenewedOnceWhenAKernelSettlesOnOneLayer) {
  std::vector<uint64_t> copies;
  for (const char* steady : {"0", "50"}) {
    const ClientRun r = run_client({"getproc", "launch", "fa4_layers"},
                                   {{"TMAGUARD_MODE", "reject"}, {"TG_STEADY", steady}});
    EXPECT_EQ(r.failed, 1) << describe(r);
    EXPECT_EQ(r.ran, 30 + std::atoi(steady));
    const auto s = r.events("summary");
    ASSERT_EQ(s.size(), 1u) << describe(r);
    EXPECT_EQ(s[0]["launches_checked"], 31 + std::atoi(steady));
    EXPECT_EQ(s[0]["tensor_maps_decoded"], 2 * 6 + 6);
    EXPECT_EQ(s[0]["launches_moved"], 4);
    copies.push_back(s[0]["clean_copies"].get<uint64_t>());
  }
  EXPECT_GE(copies[0], 1u) << "a clean launch leaves a copy";
  EXPECT_LE(copies[0], 6u) << "at most one per layer while the kernel goes from layer to layer";
  EXPECT_EQ(copies[1], copies[0] + 1) << "renewed once when it settles";
}

// More layers than a thread's clean keys hold (64, in sets of 8): the layers whose keys fall out are known by the
// process-wide clean cache; still the first two layers' maps are decoded once, every other layer is judged by its
// addresses once, and the bad layer is stopped.
TEST(FastPath, MoreLayersThanAThreadsCleanKeys) {
  const ClientRun r =
      run_client({"getproc", "launch", "fa4_layers"}, {{"TMAGUARD_MODE", "reject"}, {"TG_LAYERS", "80"}});
  EXPECT_EQ(r.failed, 1) << describe(r);
  EXPECT_EQ(r.ran, 5 * 80);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["launches_checked"], 5 * 80 + 1);
  EXPECT_EQ(s[0]["tensor_maps_decoded"], 2 * 6 + 6) << "the first two layers once, and the bad launch";
  EXPECT_EQ(s[0]["launches_moved"], 78) << "every other layer once";
}

TEST(GetProc, SemanticsPassThroughUnchanged) {
  const ClientRun r = run_client({"getproc", "launch", "getproc_semantics"}, {{"TG_EXPECT_WRAPPED", "1"}});
  EXPECT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("SEMANTICS OK"), std::string::npos) << describe(r);
  // The same checks hold against the bare stand-in driver (the semantics are the driver's, not tmaguard's).
  const ProcessResult bare = run_process({TG_CLIENT, "getproc", "launch", "getproc_semantics"},
                                         {{"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"LD_PRELOAD", ""}});
  EXPECT_NE(bare.out.find("SEMANTICS OK"), std::string::npos) << bare.out << bare.err;
}

TEST(Dlsym, RtldNextStaysRelativeToTheCaller) {
  // libtg_next_b's tg_probe_next() does dlsym(RTLD_NEXT, "tg_probe"): the next definition after b is a's (1).
  // A forward that is not a tail call makes glibc see tmaguard as the caller and find b's own (2).
  const ProcessResult bare = run_process({TG_RTLD_NEXT}, {{"LD_PRELOAD", ""}});
  ASSERT_EQ(bare.out, "1\n") << bare.err;
  const ProcessResult p = run_process({TG_RTLD_NEXT}, {{"LD_PRELOAD", TG_LIB}});
  EXPECT_EQ(p.out, "1\n") << p.err;
}

}  // namespace
