// Real processes with libtmaguard.so preloaded: tensor maps inside structure parameters (a CUTLASS 3.x Params struct
// passed as the kernel's only parameter), templates, large parameters without maps, rule addressing, the census.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "client_run.h"

namespace {

const std::string kExample = std::string(TG_SOURCE_DIR) + "/rules/examples/cutlass_gemm_epilogue.toml";

TEST(Structs, InspectShowsTheMapsInsideTheParamsStructWithTheirOffsets) {
  const ClientRun r = run_client({"getproc", "launch", "cutlass_params"}, {{"TMAGUARD_MODE", "inspect"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  const auto ins = r.events("inspect");
  ASSERT_EQ(ins.size(), 1u) << describe(r);
  ASSERT_EQ(ins[0]["params"].size(), 1u);
  EXPECT_EQ(ins[0]["params"][0], json({{"offset", 112}, {"size", 1792}})) << "128-aligned in the bank, as on the H200";
  const auto& maps = ins[0]["tensor_maps"];
  ASSERT_EQ(maps.size(), 4u) << describe(r);
  const int offsets[4] = {128, 384, 896, 1152};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(maps[i]["param_index"], 0);
    EXPECT_EQ(maps[i]["param_offset"], offsets[i]);
    EXPECT_EQ(maps[i]["embedded"], true);
  }
  EXPECT_EQ(maps[3]["tensor_map"]["dims"], json({256, 512}));
  const auto census = r.events("census");
  ASSERT_EQ(census.size(), 1u) << describe(r);
  EXPECT_EQ(census[0]["launches"], 5);
  EXPECT_EQ(census[0]["maps_in_structs"], 4);
  EXPECT_EQ(census[0]["large_params"], json::array({{{"param_index", 0}, {"size", 1792}, {"maps", 4}}}));
}

// The example rule file (a CUTLASS 3.x GEMM whose D must keep C's layout) addresses the maps by order: found inside
// the struct, they are maps 0..3.
TEST(Structs, ExampleRuleFileCatchesATransposedDInEveryMode) {
  const ClientRun ok = run_client({"getproc", "launch", "cutlass_params"}, {{"TMAGUARD_RULES", kExample}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  const ClientRun ab = run_client({"getproc", "ex", "cutlass_params"},
                                  {{"TMAGUARD_RULES", kExample}, {"TG_STRUCT_BAD", "d"}});
  EXPECT_TRUE(ab.p.signaled && ab.p.signal == SIGABRT) << describe(ab);
  ASSERT_EQ(ab.events("violation").size(), 1u) << describe(ab);
  const json v = ab.events("violation")[0];
  EXPECT_EQ(v["rule"], "gemm-d-layout");
  EXPECT_EQ(v["tensor"], "D");
  EXPECT_EQ(v["param_index"], 0);
  EXPECT_EQ(v["param_offset"], 1152);
  const ClientRun rej = run_client({"getproc", "launch", "cutlass_params"},
                                   {{"TMAGUARD_RULES", kExample}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(rej.ran, 0) << describe(rej);
  EXPECT_EQ(rej.failed, 5);
  const ClientRun log = run_client({"dlsym", "launch", "cutlass_params", "--cukernel", "--extra"},
                                   {{"TMAGUARD_RULES", kExample}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "log"}});
  EXPECT_EQ(log.ran, 5) << describe(log);
  EXPECT_EQ(log.events("violation").size(), 1u) << describe(log);
}

TEST(Structs, RulesAddressAMapInsideAParameterByOffset) {
  const std::string rules = write_file("by_offset.toml", R"([[rule]]
id = "d-like-c"
kernel = "GemmUniversal"
[rule.maps]
C = "param:0+896"
D = "param:0+1152"
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "C"
)");
  const ClientRun r = run_client({"getproc", "launch", "cutlass_params"},
                                 {{"TMAGUARD_RULES", rules}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 0) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "d-like-c");
  const ProcessResult tool = run_process({TG_TOOL, "check-rules", rules}, {});
  EXPECT_NE(tool.out.find("C = param 0+896, D = param 0+1152"), std::string::npos) << tool.out;
  std::remove(rules.c_str());
}

// CUTLASS's grouped GEMM keeps per-group template maps (every dim 1, address 0) that device code rewrites.
TEST(Structs, TemplateMapsDrawNoFinding) {
  const ClientRun r = run_client({"getproc", "launch", "grouped_templates"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["tensor_maps_decoded"], 3);
}

// A user rule that names a template map judges nothing through it (its dims say nothing of the real operand), while
// its checks between real maps still run.
TEST(Structs, RulesNamingATemplateMapJudgeNothingThroughIt) {
  const std::string rules = write_file("templates.toml", R"([[rule]]
id = "grouped-d"
kernel = "GemmUniversal"
[rule.maps]
A = 0
D = "param:0+1152"
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "A"
[[rule.check]]
id = "grouped-d-rank"
kind = "rank"
map = "D"
equals = 3
)");
  const ClientRun r = run_client({"getproc", "launch", "grouped_templates"},
                                 {{"TMAGUARD_RULES", rules}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "grouped-d-rank") << "only the check between real maps fires";
  std::remove(rules.c_str());
}

TEST(Structs, ALargeParameterOfPointersAndSizesHoldsNoMap) {
  const ClientRun r = run_client({"getproc", "launch", "large_param_no_maps"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["launches_checked"], 0) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["tensor_maps_decoded"], 0);
}

// PyTorch's foreach kernels rewrite a large list parameter on every launch. An 8-byte-aligned one (3368 bytes)
// cannot hold a CUtensorMap member and is not watched; one whose size is a multiple of 64 keeps its empty places
// watched through 200 launches of other bytes without a search or a word said, and a map that then appears in one
// of them is found and judged.
TEST(Structs, ListsRewrittenOnEveryLaunchDrawNothingAndAMapAppearingLaterIsFound) {
  const std::string rules = write_file("lists.toml", R"([[rule]]
id = "list-map-f32"
kernel = "multi_tensor_apply_kernel"
[rule.maps]
D = 0
[[rule.check]]
kind = "dtype"
map = "D"
allowed = ["float32"]
)");
  const ClientRun ok = run_client({"getproc", "launch", "lists_rewritten"}, {{"TMAGUARD_RULES", rules}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_EQ(ok.ran, 402);
  EXPECT_TRUE(ok.events("warning").empty() && ok.events("violation").empty()) << describe(ok);
  EXPECT_EQ(ok.events("summary")[0]["tensor_maps_decoded"], 0) << describe(ok);
  const ClientRun bad = run_client({"getproc", "launch", "lists_rewritten"},
                                   {{"TMAGUARD_RULES", rules}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(bad.ran, 402) << describe(bad);
  EXPECT_EQ(bad.failed, 1) << "the launch with a map of the wrong type was rejected\n" << describe(bad);
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_EQ(bad.events("violation")[0]["rule"], "list-map-f32");
  EXPECT_EQ(bad.events("violation")[0]["param_offset"], 2048);
  EXPECT_TRUE(bad.events("warning").empty()) << describe(bad);
}

// Searches are bounded: a kernel with a new map in a watched place on every launch is searched 64 times, then
// says once that it is no longer searched.
TEST(Structs, SearchesAreBoundedAndTheBoundIsSaid) {
  const ClientRun r = run_client({"getproc", "launch", "maps_everywhere"}, {});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 70);
  int said = 0;
  for (const auto& w : r.events("warning"))
    if (w["message"].get<std::string>().find("parameters changed where maps could appear on 64 launches; they are "
                                              "not searched again") != std::string::npos)
      ++said;
  EXPECT_EQ(said, 1) << describe(r);
}

// Repeated launches take the fast path (three maps inside a parameter fit the per-thread entry); the same struct
// with D rewritten in place is checked again and stopped.
TEST(Structs, RepeatedLaunchesAreCachedAndAStructRewrittenInPlaceIsCaught) {
  const ClientRun r = run_client({"getproc", "launch", "cutlass_params"}, {{"TMAGUARD_RULES", kExample},
                                                                           {"TMAGUARD_MODE", "reject"},
                                                                           {"TG_STRUCT_MUTATE", "1"}});
  EXPECT_EQ(r.ran, 5) << describe(r);
  EXPECT_EQ(r.failed, 1);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["launches_checked"], 6);
  EXPECT_EQ(s[0]["tensor_maps_decoded"], 8) << "decoded on the first launch and again after the rewrite";
}

// A kernel whose first launch gave tmaguard no bytes to search (extra without BUFFER_SIZE) is searched on the next
// launch that does: its maps are not missed for good, and the launch is not left on the no-maps fast path.
TEST(Structs, AFirstLaunchWithoutReadableBytesDefersTheSearch) {
  const ClientRun r = run_client({"getproc", "launch", "cutlass_first_unreadable"},
                                 {{"TMAGUARD_RULES", kExample}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 1) << describe(r) << "only the unreadable first launch ran";
  EXPECT_EQ(r.failed, 3);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["param_offset"], 1152);
  const ClientRun ok = run_client({"getproc", "launch", "cutlass_first_unreadable"}, {{"TMAGUARD_RULES", kExample}});
  EXPECT_EQ(ok.ran, 4) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty()) << describe(ok);
}

// Where maps sit inside a struct does not depend on which kernel launched first: an unrelated kernel with a
// 128-byte parameter that is no map (PyTorch's Array<char*, 16> at offset 8) before the CUTLASS kernel changes
// nothing.
TEST(Structs, AnUnrelatedKernelLaunchedFirstChangesNothing) {
  const ClientRun r = run_client({"getproc", "launch", "pointer_array_first"},
                                 {{"TMAGUARD_RULES", kExample}, {"TG_STRUCT_BAD", "d"}, {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 1) << "the elementwise kernel ran, no bad GEMM did\n" << describe(r);
  EXPECT_EQ(r.failed, 3);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["param_offset"], 1152);
}

// Where maps sit is not decided once from the first launch: an all-zero warm-up launch, a first launch without D,
// or one whose BUFFER_SIZE covers only part of the struct leave no later launch unsearched.
TEST(Structs, AFirstLaunchWithFewerMapsLeavesNoLaterLaunchUnsearched) {
  for (const char* first : {"zero", "without_d", "partial"}) {
    const ClientRun bad = run_client({"getproc", "launch", "cutlass_first_changes"}, {{"TMAGUARD_RULES", kExample},
                                                                                      {"TG_STRUCT_BAD", "d"},
                                                                                      {"TG_FIRST", first},
                                                                                      {"TMAGUARD_MODE", "reject"}});
    EXPECT_EQ(bad.ran, 1) << first << ": only the first launch ran\n" << describe(bad);
    EXPECT_EQ(bad.failed, 3) << first;
    ASSERT_EQ(bad.events("violation").size(), 1u) << first << "\n" << describe(bad);
    EXPECT_EQ(bad.events("violation")[0]["param_offset"], 1152) << first;
    const ClientRun ok =
        run_client({"getproc", "launch", "cutlass_first_changes"}, {{"TMAGUARD_RULES", kExample}, {"TG_FIRST", first}});
    EXPECT_EQ(ok.ran, 4) << first << "\n" << describe(ok);
    EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << first << "\n" << describe(ok);
  }
}

// A rule that names a place is checked at that place on every launch; a launch on which the place holds no map is
// said once.
TEST(Structs, APlaceARuleNamesIsCheckedOnEveryLaunch) {
  const std::string rules = write_file("named_place.toml", R"([[rule]]
id = "d-like-c"
kernel = "GemmUniversal"
[rule.maps]
C = "param:0+896"
D = "param:0+1152"
[[rule.check]]
kind = "same_innermost"
a = "D"
b = "C"
)");
  const ClientRun r = run_client({"getproc", "launch", "cutlass_first_changes"}, {{"TMAGUARD_RULES", rules},
                                                                                  {"TG_STRUCT_BAD", "d"},
                                                                                  {"TG_FIRST", "without_d"},
                                                                                  {"TMAGUARD_MODE", "reject"}});
  EXPECT_EQ(r.ran, 1) << describe(r);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "d-like-c");
  const auto w = r.events("warning");
  ASSERT_EQ(w.size(), 1u) << "the empty place, said once\n" << describe(r);
  EXPECT_EQ(w[0]["rule"], "d-like-c-map-undecodable");
  EXPECT_EQ(w[0]["param_offset"], 1152);
  // A place past the parameter can never hold a map: said once when the kernel is first seen.
  const std::string past = write_file("past.toml", R"([[rule]]
id = "past"
kernel = "GemmUniversal"
[rule.maps]
D = "param:0+1792"
[[rule.check]]
kind = "rank"
map = "D"
equals = 2
)");
  const ClientRun p = run_client({"getproc", "launch", "cutlass_params"}, {{"TMAGUARD_RULES", past}});
  ASSERT_TRUE(p.p.exited && p.p.code == 0) << describe(p);
  const auto notes = p.events("warning");
  ASSERT_EQ(notes.size(), 1u) << describe(p);
  EXPECT_NE(notes[0]["message"].get<std::string>().find("whose parameter 0 is 1792 bytes: no map can sit there"),
            std::string::npos)
      << describe(p);
  std::remove(rules.c_str());
  std::remove(past.c_str());
}

// The census in the report: which kernels' maps tmaguard could read, and how many launches that covers.
TEST(Structs, ReportCensusSaysWhatTmaguardCouldSee) {
  const std::string log = "/tmp/tmaguard_census_" + std::to_string(getpid()) + ".jsonl";
  std::remove(log.c_str());
  for (const char* sc : {"cutlass_params", "large_param_no_maps", "fa4_ok", "unmatched"})
    run_process({TG_CLIENT, "getproc", "launch", sc},
                {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_MODE", "inspect"},
                 {"TMAGUARD_LOG_FORMAT", "json"}, {"TMAGUARD_LOG", log}});
  const ProcessResult r = run_process({TG_TOOL, "report", log}, {});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("coverage: 8 of 16 launches had tensor maps tmaguard could read (4 kernels)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("param 0+1152 bfloat16 dims [256,512]"), std::string::npos) << r.out;
  std::remove(log.c_str());
}

}  // namespace

// A CUTLASS grouped GEMM's C and D move every step while its templates stay: from the kernel's second clean launch
// on, each move is judged by its addresses (the templates' bytes passed before and are not decoded again); D off the
// driver's alignment and D NULL are still said, and a template given an address is still not judged.
TEST(Structs, MapsInAStructThatOnlyMovedAreJudgedByTheirAddresses) {
  const ClientRun r =
      run_client({"getproc", "launch", "struct_moves"}, {{"TMAGUARD_MODE", "log"}, {"TG_MOVES", "10"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 1 + 10 + 3) << describe(r);
  std::vector<std::string> said;
  for (const char* kind : {"violation", "warning"})
    for (const auto& e : r.events(kind)) said.push_back(e["rule"].get<std::string>());
  std::sort(said.begin(), said.end());
  EXPECT_EQ(said, (std::vector<std::string>{"tmap-driver-would-reject", "tmap-null-address"})) << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 1u) << describe(r);
  EXPECT_EQ(s[0]["launches_moved"], 10 - 1) << describe(r);
}

