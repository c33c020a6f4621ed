// Real processes with libtmaguard.so preloaded: every FlashAttention-4 backward configuration as a stand-in kernel
// with the upstream argument order, on a GPU that reports compute capability 10.0 (Blackwell), in reject mode: no
// healthy configuration may draw an error, every transposed dK/dV that is TMA-stored must, and Blackwell-only
// descriptor features never draw one.
#include <gtest/gtest.h>

#include <algorithm>

#include "client_run.h"

namespace {

struct Row {
  std::string config;
  enum Kind { kChecked, kNothingToCheck, kNotCheckable } kind;
  std::vector<std::string> bad = {"dk", "dv", "dk_expand", "dv_expand"};  // what TG_FA4_BAD can break
  std::string not_checkable = "dK/dV not checkable (plain stores)";
  std::string cc = "10.0";  // the GPU the stand-in reports
};

const std::vector<Row> kTable = {
    {"1cta_hd64", Row::kChecked},    {"1cta_hd96", Row::kChecked},    {"1cta_hd128", Row::kChecked},
    {"2cta_hd128", Row::kChecked},   {"2cta_hd192", Row::kChecked},   {"hd256", Row::kChecked},
    {"broadcast_k", Row::kChecked},  {"gqa4", Row::kNothingToCheck},  {"gqa7", Row::kNothingToCheck},
    {"varlen4", Row::kNotCheckable}, {"varlen7", Row::kNotCheckable},
    // Hopper: FA4's SM90 backward, on an sm_90 GPU and a Blackwell one alike
    {"sm90", Row::kChecked, {"dk", "dv", "dk_expand", "dv_expand"}, "", "9.0"},
    {"sm90_gqa", Row::kNotCheckable, {"dk", "dv"}, "dK/dV fp32 accumulators (GQA)", "9.0"},
    {"sm90_varlen", Row::kChecked, {"dk", "dv"}, "", "9.0"},
    {"hd256_dq", Row::kChecked, {"dq", "dq_expand"}},
};

class Fa4Config : public ::testing::TestWithParam<Row> {};

// Every configuration with its maps in the driver's form and in CuTe DSL's (FA4's own encoder: word 2 bit 1 and
// the large-tensor flag set, no tile-size or swizzle-span word).
TEST_P(Fa4Config, HealthyIsSilentAndATransposedOrAliasedDkOrDvIsStoppedWhereItIsStoredByTma) {
  const Row& row = GetParam();
  std::vector<std::string> bads = {"none"};
  bads.insert(bads.end(), row.bad.begin(), row.bad.end());
  for (const std::string form : {"driver", "cute"})
  for (const std::string& bad : bads) {
    std::vector<std::string> args = {"getproc", "ex", "fa4_config"};
    if (form == "cute") args.push_back("--cute");
    const ClientRun r = run_client(
        args,
        {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", row.cc}, {"TG_FA4_CONFIG", row.config}, {"TG_FA4_BAD", bad}});
    const std::string what = row.config + " " + form + "-form bad=" + bad + "\n" + describe(r);
    ASSERT_TRUE(r.p.exited) << what;
    EXPECT_TRUE(r.events("warning").empty()) << what;
    const bool expect_stop = row.kind == Row::kChecked && bad != "none";
    if (!expect_stop) {
      EXPECT_EQ(r.p.code, 0) << what;
      EXPECT_EQ(r.ran, 2) << what;
      EXPECT_TRUE(r.events("violation").empty()) << what;
    } else {
      EXPECT_EQ(r.ran, 0) << what;
      ASSERT_EQ(r.events("violation").size(), 1u) << what;
      const std::string rule = bad.size() == 2 ? "fa4-" + bad + "-not-k-major"  // transposed
                                               : "fa4-" + bad.substr(0, 2) + "-aliased";  // batch stride 0
      EXPECT_EQ(r.events("violation")[0]["rule"], rule) << what;
    }
    const auto nc = r.events("not-checkable");
    ASSERT_EQ(r.events("summary").size(), 1u) << what;
    if (row.kind == Row::kNotCheckable) {
      ASSERT_EQ(nc.size(), 1u) << "said once per process\n" << what;
      EXPECT_EQ(r.events("summary")[0]["not_checkable"][row.not_checkable], 2) << what;
    } else {
      EXPECT_TRUE(nc.empty()) << what;
      EXPECT_TRUE(r.events("summary")[0]["not_checkable"].empty()) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryUpstreamConfiguration, Fa4Config, ::testing::ValuesIn(kTable),
                         [](const auto& info) { return info.param.config; });

// The text summary names what could not be checked.
TEST(Fa4Config, TextSummaryCountsLaunchesThatCouldNotBeChecked) {
  const ClientRun r =
      run_client({"getproc", "ex", "fa4_config"}, {{"TG_FA4_CONFIG", "varlen4"}, {"TMAGUARD_LOG", ""}}, false, false);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.err.find("; not checkable: dK/dV not checkable (plain stores) x2 ("), std::string::npos) << r.p.err;
  EXPECT_EQ(std::count(r.p.err.begin(), r.p.err.end(), '\n'), 3)
      << "the start record, the notice and the summary, nothing else\n" << r.p.err;
  EXPECT_EQ(r.p.err.rfind("tmaguard: start: ", 0), 0u) << r.p.err;
}

// FA4's sparse MLA dQ/dQv GEMM: a dQ or dQv whose elements share memory is stopped; one whose outer dims are not
// dS's (transposed) is said as a warning (its head dim is a compile-time constant, so never provable) and runs.
TEST(Fa4Family, SparseMlaAliasedOutputIsStoppedTransposedIsAWarning) {
  struct Case {
    std::string config, bad, rule;
    bool stop;
  };
  const std::vector<Case> cases = {
      {"mla", "none", "", false},
      {"mla_dqv", "none", "", false},
      {"mla", "dq_expand", "fa4-mla-dq-aliased", true},
      {"mla", "dqv_expand", "fa4-mla-dqv-aliased", true},
      {"mla_dqv", "dqv_expand", "fa4-mla-dqv-aliased", true},
      {"mla", "dq_t", "fa4-mla-dq-layout", false},
      {"mla", "dqv_t", "fa4-mla-dqv-layout", false},
      {"mla_dqv", "dqv_t", "fa4-mla-dqv-layout", false},
  };
  for (const Case& c : cases)
  for (const std::string form : {"driver", "cute"}) {
    std::vector<std::string> args = {"getproc", "ex", "fa4_config"};
    if (form == "cute") args.push_back("--cute");
    const ClientRun r = run_client(
        args, {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", "10.0"}, {"TG_FA4_CONFIG", c.config}, {"TG_FA4_BAD", c.bad}});
    const std::string what = c.config + " " + form + "-form bad=" + c.bad + "\n" + describe(r);
    ASSERT_TRUE(r.p.exited) << what;
    if (c.stop) {
      EXPECT_EQ(r.ran, 0) << what;
      ASSERT_EQ(r.events("violation").size(), 1u) << what;
      EXPECT_EQ(r.events("violation")[0]["rule"], c.rule) << what;
      EXPECT_TRUE(r.events("warning").empty()) << what;
    } else {
      EXPECT_EQ(r.p.code, 0) << what;
      EXPECT_EQ(r.ran, 2) << what;
      EXPECT_TRUE(r.events("violation").empty()) << what;
      if (c.rule.empty()) {
        EXPECT_TRUE(r.events("warning").empty()) << what;
      } else {
        ASSERT_EQ(r.events("warning").size(), 1u) << "said once, not per launch\n" << what;
        EXPECT_EQ(r.events("warning")[0]["rule"], c.rule) << what;
      }
    }
  }
}

// A ragged dK's record shows both views: the map as the hardware reads it, and the tensor under it.
TEST(Fa4Family, ARaggedMapsRecordShowsTheTensorUnderIt) {
  const ClientRun r = run_client(
      {"getproc", "ex", "fa4_config"},
      {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", "9.0"}, {"TG_FA4_CONFIG", "sm90_varlen"}, {"TG_FA4_BAD", "dk"}});
  const auto v = r.events("violation");
  ASSERT_FALSE(v.empty()) << describe(r);
  const json& m = v[0]["tensor_map"];
  EXPECT_EQ(m["dims"], json::parse("[8, 1073741824, 128, 2147483647]")) << describe(r);
  EXPECT_EQ(m["address"], "0x7d0005000000");
  ASSERT_TRUE(m.contains("ragged")) << describe(r);
  EXPECT_EQ(m["ragged"]["form"], "ptr-shift");
  EXPECT_EQ(m["ragged"]["dim"], 1);
  EXPECT_EQ(m["ragged"]["tensor"]["address"], "0x7f0005000000");
  EXPECT_EQ(m["ragged"]["tensor"]["dims"], json::parse(R"([8, "ragged", 128])"));
  EXPECT_EQ(m["ragged"]["tensor"]["strides_bytes"], json::parse("[2048, 16]"));
  EXPECT_EQ(v[0]["observed"], "dK dim 0 = 8 (dK dims {8,ragged,128}, K dims {128,1000,8})");
  // A healthy ragged map draws no record at all.
  const ClientRun ok = run_client({"getproc", "ex", "fa4_config"}, {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", "9.0"},
                                                                   {"TG_FA4_CONFIG", "sm90_varlen"}});
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
}

// A backward kernel of the family that no preset knows is said once, by name, and runs.
TEST(Fa4Family, UnknownBackwardKernelIsSaidOnceAndRuns) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_config"},
                                 {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", "10.0"}, {"TG_FA4_CONFIG", "unknown_family"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 2) << describe(r);
  EXPECT_TRUE(r.events("violation").empty()) << describe(r);
  ASSERT_EQ(r.events("warning").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("warning")[0]["rule"], "fa4-unknown-backward-kernel") << describe(r);
  EXPECT_NE(r.events("warning")[0].dump().find("FlashAttentionBackwardSm110"), std::string::npos) << describe(r);
}

// Descriptors with every Blackwell-only feature, each with an sm_90 driver rule broken too: warnings only, on sm_100
// and on sm_90 alike; the launches run.
TEST(Blackwell, DescriptorFeaturesOfSm100NeverDrawAnError) {
  for (const char* cc : {"10.0", "9.0"}) {
    const ClientRun r = run_client({"getproc", "launch", "blackwell_features", "--inline"},
                                   {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", cc}});
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << cc << "\n" << describe(r);
    EXPECT_EQ(r.ran, 2) << describe(r);
    EXPECT_TRUE(r.events("violation").empty()) << describe(r);
    EXPECT_GE(r.events("warning").size(), 3u) << "the features are seen and said, as warnings\n" << describe(r);
  }
}

// The driver's rules measured on the H200 stop a launch on sm_90 and only warn on sm_100.
TEST(Blackwell, DriverRulesAreErrorsOnSm90OnlyNullAddressEverywhere) {
  for (const auto& [cc, code] : std::vector<std::pair<std::string, int>>{{"9.0", 3}, {"10.0", 0}}) {
    const ClientRun r =
        run_client({"dlsym", "launch", "inline_bad_descriptor"}, {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", cc}});
    EXPECT_EQ(r.p.code, code) << cc << "\n" << describe(r);
    const auto& records = code ? r.events("violation") : r.events("warning");
    ASSERT_EQ(records.size(), 1u) << describe(r);
    EXPECT_EQ(records[0]["rule"], "tmap-driver-would-reject");
  }
  const ClientRun null =
      run_client({"dlsym", "launch", "many_params"}, {{"TMAGUARD_MODE", "reject"}, {"FAKECUDA_CC", "10.0"}});
  ASSERT_EQ(null.events("violation").size(), 1u) << describe(null);
  EXPECT_EQ(null.events("violation")[0]["rule"], "tmap-null-address");
}

}  // namespace

// A training loop's maps move every step: from the kernel's second clean launch on (what is compiled), a move is
// judged by what reads addresses (launches_moved in the summary), and a move that puts dV on dK, takes dK off the
// driver's alignment or makes dO NULL is still said, in both forms.
TEST(Fa4Moves, MapsThatOnlyMovedAreJudgedByTheirAddressesAndWrongMovesAreStillSaid) {
  for (const std::string form : {"driver", "cute"}) {
    std::vector<std::string> args = {"getproc", "ex", "fa4_moves"};
    if (form == "cute") args.push_back("--cute");
    const ClientRun r = run_client(args, {{"TMAGUARD_MODE", "log"}, {"FAKECUDA_CC", "9.0"}, {"TG_MOVES", "12"}});
    const std::string what = form + "-form\n" + describe(r);
    ASSERT_TRUE(r.p.exited) << what;
    EXPECT_EQ(r.ran, 1 + 12 + 3) << what;
    std::vector<std::string> said;
    for (const char* kind : {"violation", "warning"})
      for (const auto& e : r.events(kind)) said.push_back(e["rule"].get<std::string>());
    std::sort(said.begin(), said.end());
    EXPECT_EQ(said, (std::vector<std::string>{"fa4-dkdv-overlap", "tmap-driver-would-reject", "tmap-null-address"}))
        << what;
    const auto s = r.events("summary");
    ASSERT_EQ(s.size(), 1u) << what;
    EXPECT_EQ(s[0]["launches_moved"], 11) << what;
    EXPECT_EQ(s[0]["tensor_maps_decoded"], 2 * 6 + 3 * 6) << what << "the first two launches, and the three wrong";
    EXPECT_EQ(s[0]["launches_checked"], 16) << what;
  }
}

// Two sequence lengths in turn (two layouts of the one kernel, as bucketed batches give): each layout is compiled
// from its own clean launch (the kernel's first clean launch compiles nothing), then both take the moved path.
TEST(Fa4Moves, TwoLayoutsInTurnAreEachJudgedByTheirAddresses) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_moves"}, {{"TMAGUARD_MODE", "log"},
                                                                  {"FAKECUDA_CC", "9.0"},
                                                                  {"TG_MOVES", "12"},
                                                                  {"TG_SHAPES", "2"}});
  ASSERT_TRUE(r.p.exited) << describe(r);
  EXPECT_EQ(r.ran, 1 + 12 + 3) << describe(r);
  std::vector<std::string> said;
  for (const char* kind : {"violation", "warning"})
    for (const auto& e : r.events(kind)) said.push_back(e["rule"].get<std::string>());
  std::sort(said.begin(), said.end());
  EXPECT_EQ(said, (std::vector<std::string>{"fa4-dkdv-overlap", "tmap-driver-would-reject", "tmap-null-address"}))
      << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u) << describe(r);
  EXPECT_EQ(s[0]["launches_moved"], 12 - 2) << "the first launch of each layout and one more judged in full";
  EXPECT_EQ(s[0]["tensor_maps_decoded"], 3 * 6 + 3 * 6) << describe(r);
}
