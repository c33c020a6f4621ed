// Real processes with libtmaguard.so preloaded in front of the stand-in driver: CUDA graph kernel nodes, every entry
// point and ABI version.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"

namespace {

// CUDA graph kernel nodes, every entry point and ABI version, reached by cuGetProcAddress and by dlsym.
class Graph : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(Graph, KernelNodesAreCheckedLikeLaunches) {
  const auto& [path, entry] = GetParam();
  const ClientRun ok = run_client({path, entry, "fa4_ok"});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_EQ(ok.via, 3) << "the node calls must reach the driver entry point of the asked ABI\n" << describe(ok);
  const ClientRun rej = run_client({path, entry, "fa4_dk_bad"}, {{"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(rej.p.code, 3) << describe(rej);
  EXPECT_EQ(rej.via, 0) << "a rejected node never reaches the driver\n" << describe(rej);
  ASSERT_EQ(rej.events("violation").size(), 1u) << describe(rej);
  EXPECT_EQ(rej.events("violation")[0]["rule"], "fa4-dk-not-k-major");
  const ClientRun ab = run_client({path, entry, "fa4_dv_bad"});
  EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << describe(ab);
}

std::vector<std::pair<std::string, std::string>> graph_cases() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const char* e : {"graph_add_v1", "graph_add", "graph_set_v1", "graph_set", "graph_exec_set_v1", "graph_exec_set",
                        "graph_add_node", "graph_add_node_v2", "graph_node_set", "graph_exec_node_set"})
    for (const char* p : {"getproc", "dlsym"}) v.emplace_back(p, e);
  return v;
}
INSTANTIATE_TEST_SUITE_P(AllGraphEntries, Graph, ::testing::ValuesIn(graph_cases()),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

TEST(Graph, NodeLaunchingACuKernelThroughKern) {
  const ClientRun r = run_client({"getproc", "graph_add", "fa4_dk_bad", "--cukernel"},
                                 {{"TMAGUARD_MODE", "reject"}, {"TG_NODE_KERN", "1"}});
  EXPECT_EQ(r.via, 0) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const ClientRun ok = run_client({"getproc", "graph_add", "fa4_ok", "--cukernel"}, {{"TG_NODE_KERN", "1"}});
  EXPECT_EQ(ok.via, 3) << describe(ok);
}

}  // namespace
