// Real processes with libtmaguard.so preloaded: tensor maps a kernel builds in device memory (Triton's device-side
// descriptors in its global scratch), read back after the kernel (shim/device_audit.h). The stand-in driver runs the
// kernel's body at launch, copies stream-ordered into pinned memory, and makes events report "not ready" first.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>

#include "client_run.h"

namespace {

const std::string kRules = std::string(TG_SOURCE_DIR) + "/rules/examples/triton_device_desc.toml";

struct Stand {
  unsigned long copies = ~0UL, violations = ~0UL, queries = ~0UL;
};
Stand stand_in(const ClientRun& r) {
  Stand s;
  const auto pos = r.p.out.find("DEVICE ");
  if (pos != std::string::npos)
    std::sscanf(r.p.out.c_str() + pos, "DEVICE copies=%lu capture_violations=%lu pointer_queries=%lu", &s.copies,
                &s.violations, &s.queries);
  return s;
}

json audit_of(const ClientRun& r) {
  const auto s = r.events("summary");
  return s.empty() || !s.back().contains("device_audit") ? json() : s.back()["device_audit"];
}

ClientRun run(std::map<std::string, std::string> env, const std::string& entry = "launch") {
  return run_client({"getproc", entry, "device_desc"}, std::move(env));
}

TEST(DeviceMaps, HealthyDeviceBuiltMapsAreFoundAndPass) {
  const ClientRun r = run({{"TMAGUARD_MODE", "inspect"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 6);
  EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << describe(r);
  const json a = audit_of(r);
  ASSERT_FALSE(a.is_null()) << describe(r);
  EXPECT_EQ(a["launches_audited"], 4) << "TMAGUARD_DEVICE_AUDIT defaults to the first 4 launches";
  EXPECT_EQ(a["buffers_read"], 12) << "a, out and the scratch, after each audited launch";
  EXPECT_EQ(a["maps_found"], 8) << "a's and out's maps (the other programs' copies are the same bytes)";
  EXPECT_EQ(stand_in(r).copies, 12u);
  // inspect: one record for the layout, with the places and the provenance
  std::vector<json> device_records;
  for (const json& i : r.events("inspect"))
    if (!i["tensor_maps"].empty()) device_records.push_back(i);
  ASSERT_EQ(device_records.size(), 1u) << describe(r);
  const json& maps = device_records[0]["tensor_maps"];
  EXPECT_EQ(device_records[0]["grid"], json::parse("[1,1,1]")) << "the audited launch's own grid and block";
  EXPECT_EQ(device_records[0]["block"], json::parse("[128,1,1]"));
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[1]["space"], "device");
  EXPECT_EQ(maps[1]["param_index"], 3);
  EXPECT_EQ(maps[1]["device_offset"], 128);
  EXPECT_EQ(maps[1]["read_after_kernel"], true);
  EXPECT_EQ(maps[1]["tensor_map"]["encoder"], "device-built");
  EXPECT_NE(maps[1]["provenance"].get<std::string>().find("read back after the kernel"), std::string::npos);
  const auto census = r.events("census");
  ASSERT_EQ(census.size(), 1u) << describe(r);
  EXPECT_EQ(census[0]["maps_in_device_memory"], 2);
}

// Ragged store maps (an address below the tensor, extents of 2^30 and 2^31 - 1) are found and judged as the tensor
// under them: no allocation or footprint finding, in abort mode, in either idiom.
TEST(DeviceMaps, RaggedMapsAreFoundAndDrawNothing) {
  for (const char* form : {"ragged", "ragged_wrap"}) {
    const ClientRun r = run({{"TG_DEVICE_BAD", form}, {"TMAGUARD_MODE", "abort"}});
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << form << describe(r);
    EXPECT_EQ(r.ran, 6) << form;
    EXPECT_TRUE(r.events("violation").empty() && r.events("warning").empty()) << form << describe(r);
    const json a = audit_of(r);
    ASSERT_FALSE(a.is_null()) << describe(r);
    EXPECT_EQ(a["maps_found"], 8) << form << ": the ragged map counts (its tensor lies in out's allocation)\n"
                                  << describe(r);
  }
}

TEST(DeviceMaps, AMapReachingPastItsAllocationAbortsAfterTheKernel) {
  for (const char* entry : {"launch", "ex_ptsz", "coop"}) {
    const ClientRun r = run({{"TG_DEVICE_BAD", "beyond"}}, entry);
    EXPECT_TRUE(r.p.signaled && r.p.signal == SIGABRT) << entry << describe(r);
    const auto v = r.events("violation");
    ASSERT_FALSE(v.empty()) << entry << describe(r);
    EXPECT_EQ(v[0]["rule"], "tmap-beyond-allocation");
    EXPECT_EQ(v[0]["param_index"], 3);
    EXPECT_EQ(v[0]["device_offset"], 128);
    EXPECT_EQ(v[0]["read_after_kernel"], true);
    EXPECT_EQ(v[0]["action"], "abort");
    EXPECT_EQ(v.size(), 1u) << "every program's copy is the same map: one record";
    // Judged after the kernel, on tmaguard's worker: the record still names the launching thread's call site.
    bool named = false;
    for (const auto& f : v[0].value("stack", json::array()))
      named |= f.value("symbol", "").find("client::launch") != std::string::npos;
    EXPECT_TRUE(named) << entry << " " << v[0].dump();
    bool said = false;
    for (const json& n : r.events("abort"))
      said |= n["message"].get<std::string>().find("read back after its kernel ran") != std::string::npos;
    EXPECT_TRUE(said) << describe(r);
  }
}

TEST(DeviceMaps, RejectModeCannotStopALaunchThatRanAndLogs) {
  const ClientRun r = run({{"TG_DEVICE_BAD", "beyond"}, {"TMAGUARD_MODE", "reject"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 6);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_EQ(v[0]["action"], "log");
  EXPECT_EQ(r.events("summary").back()["violations"]["tmap-beyond-allocation"], 4) << "once per audited launch";
}

TEST(DeviceMaps, AUserRuleNamesADeviceMapByItsPointerAndOffset) {
  const ClientRun bad = run({{"TG_DEVICE_BAD", "transposed"}, {"TMAGUARD_RULES", kRules}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(bad.p.exited && bad.p.code == 0) << describe(bad);
  const auto v = bad.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(bad);
  EXPECT_EQ(v[0]["rule"], "device-desc-out-transposed");
  EXPECT_EQ(v[0]["tensor"], "OUT");
  EXPECT_EQ(v[0]["device_offset"], 128);
  // Without the rule nothing is wrong with a transposed map as such; with it, a healthy run stays clean.
  const ClientRun plain = run({{"TG_DEVICE_BAD", "transposed"}, {"TMAGUARD_MODE", "log"}});
  EXPECT_TRUE(plain.events("violation").empty()) << describe(plain);
  const ClientRun ok = run({{"TMAGUARD_RULES", kRules}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
}

// A map the kernel built in device memory is judged against the tensors its launching thread declared, as a map in
// the parameters is: out's transposed store map draws map-tensor-mismatch naming out, read after the kernel.
TEST(DeviceMaps, ADeviceMapIsJudgedAgainstTheTensorsTheLaunchDeclared) {
  const ClientRun bad = run({{"TG_DEVICE_BAD", "transposed"}, {"TG_DEVICE_DECLARE", "1"}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(bad.p.exited && bad.p.code == 0) << describe(bad);
  const auto v = bad.events("violation");
  ASSERT_EQ(v.size(), 1u) << describe(bad);
  EXPECT_EQ(v[0]["rule"], "map-tensor-mismatch");
  EXPECT_EQ(v[0]["tensor"], "out");
  EXPECT_EQ(v[0]["device_offset"], 128);
  EXPECT_EQ(bad.events("summary").back()["violations"]["map-tensor-mismatch"], 4) << "once per audited launch";
  const ClientRun ok = run({{"TG_DEVICE_DECLARE", "1"}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
}

TEST(DeviceMaps, WhatIsJudgedIsWhatTheKernelWroteEvenWhenTheBufferIsFreedAndReused) {
  const ClientRun bad = run({{"TG_DEVICE_BAD", "beyond"}, {"TG_DEVICE_FREE", "1"}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(bad.p.exited && bad.p.code == 0) << describe(bad);
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  const ClientRun ok = run({{"TG_DEVICE_FREE", "1"}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  EXPECT_EQ(audit_of(ok)["maps_found"], 8);
}

// The maps read back are judged against the allocations as they were when the bytes were read, not when the worker
// looks (events report "not ready" 50 times, so the job has freed `out` by then): a bad map whose tensor was freed
// right after the kernel is still found, and a healthy one whose tensor's address went to a smaller allocation in
// between is still clean (abort mode: a false tmap-beyond-allocation would kill the job).
TEST(DeviceMaps, MapsAreJudgedAgainstTheAllocationsAsTheyWereWhenRead) {
  for (const char* how : {"free", "smaller"}) {
    const ClientRun ok = run({{"TG_DEVICE_FREE_OUT", how}, {"FAKECUDA_EVENT_POLLS", "50"}, {"TMAGUARD_MODE", "abort"}});
    ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << how << "\n" << describe(ok);
    EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << how << "\n" << describe(ok);
    EXPECT_EQ(audit_of(ok)["maps_found"], 8) << how << "\n" << describe(ok);
    const ClientRun bad = run({{"TG_DEVICE_FREE_OUT", how}, {"TG_DEVICE_BAD", "beyond"}, {"FAKECUDA_EVENT_POLLS", "50"},
                               {"TMAGUARD_MODE", "log"}});
    ASSERT_TRUE(bad.p.exited && bad.p.code == 0) << how << "\n" << describe(bad);
    ASSERT_EQ(bad.events("violation").size(), 1u) << how << "\n" << describe(bad);
    EXPECT_EQ(bad.events("violation")[0]["rule"], "tmap-beyond-allocation");
    EXPECT_EQ(bad.events("summary").back()["violations"]["tmap-beyond-allocation"], 4) << describe(bad);
  }
}

// TMAGUARD_DEVICE_AUDIT=all audits every launch: a bad map right after a burst of 1000 launches is found, and every
// launch is counted as audited (a launch that finds every read slot in flight waits for the oldest read).
TEST(DeviceMaps, AllMeansEveryLaunch) {
  ProcessOptions opt;
  opt.timeout_s = 120;
  const ClientRun r = run_client({"getproc", "launch", "device_desc"},
                                 {{"TG_DEVICE_BURST", "1000"}, {"TMAGUARD_DEVICE_AUDIT", "all"}, {"TMAGUARD_MODE", "log"}},
                                 false, true, opt);
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 1001);
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("violation")[0]["rule"], "tmap-beyond-allocation");
  const json a = audit_of(r);
  EXPECT_EQ(a["launches_audited"], 1001) << a.dump();
  EXPECT_EQ(a["buffers_read"], 3003) << a.dump();
  EXPECT_FALSE(a["skipped"].contains("read-back slots all in use")) << a.dump();
}

// A tensor across two allocations that follow each other without a gap is one span (PyTorch's expandable segments);
// a map reaching past both is still past its allocation.
TEST(DeviceMaps, AdjacentAllocationsAreOneSpan) {
  const ClientRun ok = run({{"TG_DEVICE_SPLIT", "1"}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_TRUE(ok.events("violation").empty() && ok.events("warning").empty()) << describe(ok);
  EXPECT_EQ(audit_of(ok)["maps_found"], 8);
  const ClientRun bad = run({{"TG_DEVICE_SPLIT", "1"}, {"TG_DEVICE_BAD", "beyond"}, {"TMAGUARD_MODE", "log"}});
  ASSERT_EQ(bad.events("violation").size(), 1u) << describe(bad);
  EXPECT_NE(bad.events("violation")[0]["observed"].get<std::string>().find("reaches 16384 bytes past"),
            std::string::npos)
      << describe(bad);
}

TEST(DeviceMaps, HostMemoryIsNeverRead) {
  for (const char* where : {"host", "pinned"}) {
    const ClientRun r = run({{"TG_DEVICE_SCRATCH", where}, {"TG_DEVICE_BAD", "beyond"}});
    ASSERT_TRUE(r.p.exited && r.p.code == 0) << where << describe(r);
    EXPECT_TRUE(r.events("violation").empty()) << where << describe(r);
    EXPECT_EQ(stand_in(r).copies, 8u) << where << ": a and out only, never the scratch in host memory";
    EXPECT_EQ(audit_of(r)["maps_found"], 0) << where;
  }
}

TEST(DeviceMaps, AStreamBeingCapturedGetsNoWorkAndTheSkipIsCounted) {
  const ClientRun r = run({{"TG_DEVICE_CAPTURE", "1"}, {"TG_DEVICE_BAD", "beyond"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(stand_in(r).copies, 0u);
  EXPECT_EQ(stand_in(r).violations, 0u);
  EXPECT_EQ(audit_of(r)["skipped"]["stream capturing into a graph"], 6) << describe(r);
  EXPECT_EQ(audit_of(r)["launches_audited"], 0);
}

// Five threads, each its own kernel: 5 x 4 audited launches x 3 reads fit the 64 read-back slots at once, so every
// audit happens however the threads and the worker interleave.
TEST(DeviceMaps, ManyThreadsLaunchingAtOnce) {
  const ClientRun ok = run({{"TG_DEVICE_THREADS", "5"}});
  ASSERT_TRUE(ok.p.exited && ok.p.code == 0) << describe(ok);
  EXPECT_EQ(ok.ran, 30);
  EXPECT_EQ(audit_of(ok)["launches_audited"], 20) << describe(ok);
  EXPECT_EQ(audit_of(ok)["maps_found"], 40);
  EXPECT_TRUE(audit_of(ok)["skipped"].empty()) << describe(ok);
  const ClientRun bad = run({{"TG_DEVICE_THREADS", "5"}, {"TG_DEVICE_BAD", "beyond"}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(bad.p.exited && bad.p.code == 0) << describe(bad);
  EXPECT_EQ(bad.events("summary").back()["violations"]["tmap-beyond-allocation"], 20) << describe(bad);
  // More reads than slots: the audit skips some (counted) and the job is untouched.
  const ClientRun many = run({{"TG_DEVICE_THREADS", "16"}, {"TMAGUARD_DEVICE_AUDIT", "all"}});
  ASSERT_TRUE(many.p.exited && many.p.code == 0) << describe(many);
  EXPECT_EQ(many.ran, 96);
  EXPECT_TRUE(many.events("violation").empty() && many.events("warning").empty()) << describe(many);
}

// A child forked after the audit's worker started has no worker and no read-back slots of its parent's: it starts
// its own, audits its own kernel, and both processes say what they audited.
TEST(DeviceMaps, AForkedChildAuditsWithItsOwnWorker) {
  const ClientRun r = run_client({"getproc", "launch", "device_fork"}, {{"TG_DEVICE_BAD", "beyond"}, {"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_NE(r.p.out.find("CHILD_STATUS exited=1 code=0"), std::string::npos) << describe(r);
  const auto s = r.events("summary");
  ASSERT_EQ(s.size(), 2u) << describe(r);
  const auto v = r.events("violation");
  ASSERT_EQ(v.size(), 1u) << "the child's bad map, once" << describe(r);
  EXPECT_EQ(v[0]["pid"], s[0]["pid"]) << "reported by the child";
  EXPECT_EQ(s[0]["device_audit"]["launches_audited"], 4) << "the child's own kernel" << describe(r);
  EXPECT_EQ(s[0]["device_audit"]["maps_found"], 8);
  EXPECT_EQ(s[1]["device_audit"]["launches_audited"], 6) << "the parent: 2 before the fork, 4 of its second kernel";
  EXPECT_TRUE(s[1]["violations"].empty()) << describe(r);
}

// A kernel whose 8-byte parameters hold no device address has nothing to read: its first launches still use up its
// audits, and after them it asks the driver nothing more (the fast path).
TEST(DeviceMaps, NothingToReadStillEndsTheAudit) {
  const ClientRun r = run_client({"getproc", "launch", "scalar_params"});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 50);
  EXPECT_EQ(stand_in(r).copies, 0u);
  EXPECT_EQ(stand_in(r).queries, 4u) << "the int64 on each of the 4 audited launches (NULL is never asked about), "
                                        "then none"
                                     << describe(r);
}

TEST(DeviceMaps, TheAuditPolicyFollowsTheEnvironment) {
  const ClientRun off = run({{"TMAGUARD_DEVICE_AUDIT", "off"}, {"TG_DEVICE_BAD", "beyond"}});
  ASSERT_TRUE(off.p.exited && off.p.code == 0) << describe(off);
  EXPECT_EQ(stand_in(off).copies, 0u);
  EXPECT_TRUE(audit_of(off).is_null()) << describe(off);
  const ClientRun all = run({{"TMAGUARD_DEVICE_AUDIT", "all"}});
  EXPECT_EQ(audit_of(all)["launches_audited"], 6) << describe(all);
  const ClientRun two = run({{"TMAGUARD_DEVICE_AUDIT", " 2 "}});
  EXPECT_EQ(audit_of(two)["launches_audited"], 2) << describe(two);
  // 128 bytes past each pointer: program 0's first map only
  const ClientRun small = run({{"TMAGUARD_DEVICE_READ_BYTES", "128"}});
  EXPECT_EQ(audit_of(small)["maps_found"], 4) << describe(small);
  for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
           {"TMAGUARD_DEVICE_AUDIT", "first-4"}, {"TMAGUARD_DEVICE_READ_BYTES", "100"},
           {"TMAGUARD_DEVICE_READ_BYTES", "1048576"}, {"TMAGUARD_DEVICE_READ_BYTES", "4k"}}) {
    const ClientRun r = run({{var, value}});
    EXPECT_TRUE(r.p.exited && r.p.code == 78) << var << "=" << value << describe(r);
    EXPECT_EQ(r.ran, -1) << "stopped before its first launch";
    EXPECT_NE(r.p.err.find(var + "='" + value + "'"), std::string::npos) << describe(r);
  }
}

TEST(DeviceMaps, WithoutPinnedMemoryTheAuditStepsAsideOnceAndTheJobRuns) {
  const ClientRun r = run({{"FAKECUDA_NO_PINNED", "1"}, {"TG_DEVICE_BAD", "beyond"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 6);
  EXPECT_EQ(r.events("warning").size(), 1u) << describe(r);
  EXPECT_EQ(audit_of(r)["skipped"]["no pinned host memory"], 1) << "and the kernel is not audited again" << describe(r);
}

}  // namespace
