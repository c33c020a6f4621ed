// Real processes with libtmaguard.so preloaded: tensor maps against the tensors the job declared
// (include/tmaguard/declare.h). q is a transposed view; a map built from its shape as if it were contiguous points
// at q's bytes, is accepted by the driver and is well formed: only the declaration shows it is wrong.
#include <gtest/gtest.h>

#include "client_run.h"

namespace {

std::vector<json> mismatches(const ClientRun& r) {
  std::vector<json> out;
  for (const json& v : r.events("violation"))
    if (v.value("rule", "") == "map-tensor-mismatch") out.push_back(v);
  return out;
}

ClientRun run(const char* scenario, const char* mode = "reject") {
  return run_client({"getproc", "launch", scenario}, {{"TMAGUARD_MODE", mode}});
}

TEST(Tensors, AViewsRightMapRunsAndItsShapeBuiltMapIsStoppedNamingTheTensor) {
  const ClientRun right = run("declared_right");
  EXPECT_NE(right.p.out.find("TENSORS right ran=1"), std::string::npos) << describe(right);
  EXPECT_TRUE(mismatches(right).empty()) << describe(right);
  ASSERT_EQ(right.events("summary").size(), 1u) << describe(right);
  EXPECT_EQ(right.events("summary")[0].value("maps_compared_with_tensors", 0), 1) << describe(right);

  const ClientRun shape = run("declared_shape");
  EXPECT_NE(shape.p.out.find("TENSORS shape ran=0"), std::string::npos) << describe(shape);
  const std::vector<json> found = mismatches(shape);
  ASSERT_EQ(found.size(), 1u) << describe(shape);
  EXPECT_EQ(found[0]["tensor"], "q") << found[0].dump();
  EXPECT_EQ(found[0]["action"], "reject") << found[0].dump();
  EXPECT_NE(found[0]["expected"].get<std::string>().find("shape [2, 128, 4, 64], strides [32768, 64, 8192, 1]"),
            std::string::npos)
      << found[0].dump();
  EXPECT_NE(found[0]["observed"].get<std::string>().find("byte strides [2, 128, 512, 65536]"), std::string::npos)
      << found[0].dump();
}

TEST(Tensors, AMapPastTheDeclaredTensorIsStopped) {
  const ClientRun r = run("declared_past");
  EXPECT_NE(r.p.out.find("TENSORS past ran=0"), std::string::npos) << describe(r);
  ASSERT_EQ(mismatches(r).size(), 1u) << describe(r);
  EXPECT_NE(mismatches(r)[0]["observed"].get<std::string>().find("past its end"), std::string::npos) << describe(r);
}

TEST(Tensors, WithoutADeclarationOrAfterItEndedAMapIsJudgedAsBefore) {
  for (const char* scenario : {"undeclared_shape", "ended_shape"}) {
    const ClientRun r = run(scenario);
    EXPECT_NE(r.p.out.find("ran=1"), std::string::npos) << scenario << "\n" << describe(r);
    EXPECT_TRUE(mismatches(r).empty()) << scenario << "\n" << describe(r);
    EXPECT_EQ(r.failed, 0) << scenario << "\n" << describe(r);
    ASSERT_EQ(r.events("summary").size(), 1u) << scenario << "\n" << describe(r);
    EXPECT_FALSE(r.events("summary")[0].contains("maps_compared_with_tensors")) << "nothing was declared";
  }
}

// A clean map is judged once under a declaration (the repeat passes by the memo), and the memo never lets a map
// that was clean undeclared pass a declaration it contradicts.
TEST(Tensors, ARepeatUnderTheSameDeclarationIsRememberedAndAnotherMapStillJudged) {
  const ClientRun r = run("declared_twice");
  EXPECT_NE(r.p.out.find("TENSORS twice right_ran=2 shape_ran=0"), std::string::npos) << describe(r);
  ASSERT_EQ(mismatches(r).size(), 1u) << describe(r);
  ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary")[0].value("maps_compared_with_tensors", 0), 2) << "the repeat passed by the memo";
}

// A map the rules name as stored (rules/examples/triton_matmul.toml: C) over a declared view whose rows end inside a
// 16-byte chunk: the store would overwrite the view's neighbours, measured on an H200 (docs/gpu-runs/
// nvidia-h200-spill.txt). Rows that end on a chunk, no declaration, or no rule naming C stored: it runs.
TEST(Tensors, AStoredMapWhoseRowsSpillOutOfADeclaredViewIsStopped) {
  const std::string rules = std::string(TG_SOURCE_DIR) + "/rules/examples/triton_matmul.toml";
  const auto with_rules = [&](const char* scenario) {
    return run_client({"getproc", "launch", scenario}, {{"TMAGUARD_MODE", "reject"}, {"TMAGUARD_RULES", rules}});
  };
  const ClientRun spill = with_rules("spill_view");
  EXPECT_NE(spill.p.out.find("TENSORS spill ran=0"), std::string::npos) << describe(spill);
  const std::vector<json> v = spill.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(spill);
  EXPECT_EQ(v[0]["rule"], "map-store-spill") << v[0].dump();
  EXPECT_EQ(v[0]["tensor"], "out") << v[0].dump();
  EXPECT_NE(v[0]["observed"].get<std::string>().find("writes bytes 932-943 of each row"), std::string::npos)
      << v[0].dump();
  for (const char* scenario : {"spill_chunk", "spill_undeclared"}) {
    const ClientRun r = with_rules(scenario);
    EXPECT_NE(r.p.out.find("ran=1"), std::string::npos) << scenario << "\n" << describe(r);
    EXPECT_TRUE(r.events("violation").empty()) << scenario << "\n" << describe(r);
  }
  const ClientRun no_rule = run("spill_view");
  EXPECT_NE(no_rule.p.out.find("TENSORS spill ran=1"), std::string::npos) << describe(no_rule);
  EXPECT_TRUE(no_rule.events("violation").empty()) << describe(no_rule);
}

// The Python helper: tmaguard.declared(q=view) around a launch made through ctypes, through its C extension or
// (`backend` "ctypes") through ctypes.
ClientRun python_job(const char* which, bool preloaded = true, const std::string& backend = "") {
  std::vector<std::string> args = {TG_PYTHON, TG_DECLARED_JOB, TG_CLIENT_LIB, which};
  if (!backend.empty()) args.push_back(backend);
  if (!preloaded) {
    ProcessResult p = run_process(args, {{"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"LD_PRELOAD", ""}});
    ClientRun r;
    r.p = p;
    return r;
  }
  return run_preloaded(args, {{"TMAGUARD_MODE", "reject"}});
}

TEST(Tensors, APythonJobDeclaresWithTheHelperAndItsShapeBuiltMapIsStopped) {
  for (const std::string backend : {"speedups", "ctypes"}) {
    const std::string arg = backend == "ctypes" ? backend : "";
    const ClientRun right = python_job("right", true, arg);
    EXPECT_NE(right.p.out.find("DECLARED active=True backend=" + backend), std::string::npos) << describe(right);
    EXPECT_NE(right.p.out.find("TENSORS right ran=1"), std::string::npos) << describe(right);
    EXPECT_TRUE(mismatches(right).empty()) << describe(right);
    for (const char* which : {"shape", "past", "nested", "watched"}) {
      const ClientRun r = python_job(which, true, arg);
      EXPECT_NE(r.p.out.find(" ran=0"), std::string::npos) << backend << " " << which << describe(r);
      ASSERT_EQ(mismatches(r).size(), 1u) << backend << " " << which << describe(r);
      EXPECT_EQ(mismatches(r)[0]["tensor"], "q") << backend << " " << which;
    }
    // undeclared, left, or a tensor whose metadata cannot be read (the watched call runs as it would unwatched)
    for (const char* which : {"undeclared", "ended", "watched_fake"}) {
      const ClientRun r = python_job(which, true, arg);
      EXPECT_NE(r.p.out.find("ran=1"), std::string::npos) << backend << " " << which << describe(r);
      EXPECT_TRUE(mismatches(r).empty()) << backend << " " << which << describe(r);
    }
  }
}

TEST(Tensors, WithoutTmaguardTheHelperIsANoOp) {
  const ClientRun r = python_job("absent", false);
  EXPECT_NE(r.p.out.find("DECLARED active=False"), std::string::npos) << r.p.out << r.p.err;
  EXPECT_NE(r.p.out.find("TENSORS shape ran=1"), std::string::npos) << r.p.out << r.p.err;
  EXPECT_EQ(r.p.code, 0) << r.p.out << r.p.err;
}

// Abort mode stops the job at the first mismatch, as at any other error.
TEST(Tensors, AbortModeAbortsOnAMismatch) {
  const ClientRun r = run("declared_shape", "abort");
  EXPECT_TRUE(r.p.signaled || r.p.code != 0) << describe(r);
  EXPECT_EQ(r.p.out.find("TENSORS shape ran=1"), std::string::npos) << describe(r);
  EXPECT_EQ(mismatches(r).size(), 1u) << describe(r);
}

}  // namespace
