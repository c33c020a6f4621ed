// Real processes with libtmaguard.so preloaded in front of the stand-in driver: what a user reads: JSON and text
// records, inspect records, tmaguard-tool, the encode explainer.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "client_run.h"
#include "tmaguard_version.h"

namespace {

// ---- the record a user reads
TEST(Report, JsonViolationRecordIsComplete) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"RANK", "5"}});
  ASSERT_EQ(r.events("violation").size(), 1u) << describe(r);
  const json v = r.events("violation")[0];
  for (const char* k : {"event", "rule", "severity", "kernel", "tensor", "param_index", "tensor_map", "expected",
                        "observed", "hint", "action", "pid", "tid", "rank", "timestamp", "provenance", "severity_text",
                        "severity_number", "body", "schema", "code.function.name", "code.file.path"})
    EXPECT_TRUE(v.contains(k)) << k;
  EXPECT_EQ(v["rank"], 5);
  EXPECT_EQ(v["tensor"], "dK");
  EXPECT_EQ(v["param_index"], 7);
  EXPECT_NE(v["kernel"].get<std::string>().find("FlashAttentionBackwardSm100"), std::string::npos);
  EXPECT_EQ(v["tensor_map"]["dims"], json({256, 128, 4, 2}));
  EXPECT_EQ(v["tensor_map"]["strides_bytes"], json({512, 65536, 262144}));
  EXPECT_EQ(v["tensor_map"]["box"], json({64, 128, 1, 1}));
  EXPECT_EQ(v["tensor_map"]["dtype"], "bfloat16");
  EXPECT_EQ(v["tensor_map"]["swizzle"], "128B");
  EXPECT_EQ(v["tensor_map"]["address"], "0x7f0005000000");
  EXPECT_EQ(v["provenance"], "encoded by cuTensorMapEncodeTiled in this process");
  EXPECT_NE(v["hint"].get<std::string>().find("torch.empty_like(k)"), std::string::npos);
}

// A log says which tmaguard wrote it: the summary carries this build's version and git revision (the same the
// library's marker and `tmaguard --version` give), in JSON and in text.
TEST(Report, SummaryNamesTheVersionThatWroteIt) {
  const ClientRun r = run_client({"dlsym", "launch", "fa4_ok"}, {});
  ASSERT_EQ(r.events("summary").size(), 1u) << describe(r);
  EXPECT_EQ(r.events("summary")[0]["tmaguard_version"], TMAGUARD_VERSION);
  EXPECT_EQ(r.events("summary")[0]["tmaguard_revision"], TMAGUARD_REVISION);
  const ClientRun t = run_client({"dlsym", "launch", "fa4_ok"}, {{"TMAGUARD_LOG", ""}}, false, false);
  EXPECT_NE(t.p.err.find(std::string("; tmaguard ") + TMAGUARD_VERSION + " git " + TMAGUARD_REVISION + ")"),
            std::string::npos)
      << describe(t);
  const ProcessResult v = run_process({TG_TOOL, "version", "--library", TG_LIB}, {});
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find(std::string("tmaguard ") + TMAGUARD_VERSION + " (git " + TMAGUARD_REVISION + ")"),
            std::string::npos)
      << v.out;
  const ProcessResult bad = run_process({TG_TOOL, "version", "--library", TG_CLIENT}, {});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("no version marker"), std::string::npos) << bad.out;
}

TEST(Report, TextFormatToStderrWithPidExpansion) {
  const ClientRun r =
      run_client({"dlsym", "launch", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", ""}}, false, false);
  EXPECT_NE(r.p.err.find("tmaguard: violation fa4-dk-not-k-major [error] action=log kernel="), std::string::npos)
      << describe(r);
  EXPECT_NE(r.p.err.find("tmaguard:   dK tensor map: tiled bfloat16 rank 4 dims {256,128,4,2}"), std::string::npos);
  EXPECT_NE(r.p.err.find("tmaguard: SUMMARY: 3 launches seen, 3 checked"), std::string::npos) << describe(r);
}

TEST(Report, LogPathPidExpansion) {
  const std::string pattern = "/tmp/tmaguard_pid_test.%p.log";
  const ProcessResult p = run_process(
      {TG_CLIENT, "dlsym", "launch", "fa4_dk_bad"},
      {{"LD_PRELOAD", TG_LIB}, {"LD_LIBRARY_PATH", TG_FAKE_DIR}, {"TMAGUARD_MODE", "log"}, {"TMAGUARD_LOG", pattern}});
  ASSERT_TRUE(p.exited && p.code == 0) << p.err;
  // The child's pid is not known here: find the file by glob, it must carry digits where %p was.
  const ProcessResult ls =
      run_process({"/bin/sh", "-c", "ls /tmp/tmaguard_pid_test.[0-9]*.log && rm -f /tmp/tmaguard_pid_test.*.log"}, {});
  EXPECT_EQ(ls.code, 0) << ls.out << ls.err;
}

TEST(Inspect, OneRecordPerKernelAndLayoutNothingBlocked) {
  const ClientRun r = run_client({"getproc", "ex", "fa4_dk_bad"}, {{"TMAGUARD_MODE", "inspect"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.ran, 3);
  const auto ins = r.events("inspect");
  ASSERT_EQ(ins.size(), 1u) << "three launches of one layout give one record\n" << describe(r);
  const json& k = ins[0];
  EXPECT_NE(k["kernel"].get<std::string>().find("FlashAttentionBackwardSm100"), std::string::npos);
  EXPECT_EQ(k["grid"], json({2, 1, 1}));
  EXPECT_EQ(k["block"], json({128, 1, 1}));
  ASSERT_EQ(k["params"].size(), 9u);
  EXPECT_EQ(k["params"][1], json({{"offset", 112}, {"size", 128}}));  // as the H200 reports it
  ASSERT_EQ(k["tensor_maps"].size(), 6u);
  EXPECT_EQ(k["tensor_maps"][5]["param_index"], 7);
  EXPECT_EQ(k["tensor_maps"][5]["tensor_map"]["dims"], json({256, 128, 4, 2}));
  EXPECT_EQ(k["tensor_maps"][0]["provenance"], "encoded by cuTensorMapEncodeTiled in this process");
  ASSERT_EQ(r.events("violation").size(), 1u);
  EXPECT_EQ(r.events("violation")[0]["action"], "inspect");
}

TEST(Inspect, KernelsWithoutMapsAreRecordedToo) {
  const ClientRun r = run_client({"dlsym", "launch", "unmatched"}, {{"TMAGUARD_MODE", "inspect"}});
  const auto ins = r.events("inspect");
  ASSERT_EQ(ins.size(), 1u) << describe(r);
  EXPECT_EQ(ins[0]["kernel"], "plain_elementwise_kernel");
  EXPECT_TRUE(ins[0]["tensor_maps"].empty());
}

TEST(Tool, CheckRulesAndReport) {
  const ProcessResult ok =
      run_process({TG_TOOL, "check-rules", std::string(TG_SOURCE_DIR) + "/rules/fa4_sm100_bwd.toml"}, {});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("fa4_sm100_bwd.toml: 7 rules OK"), std::string::npos);
  const std::string bad = "/tmp/tmaguard_tool_bad.toml";
  std::ofstream(bad) << "[[rule]]\nid = \"x\"\nkernel = \"k\"\nexpect_map_count = [1]\nseverity = \"fatal\"\n";
  const ProcessResult b = run_process({TG_TOOL, "check-rules", bad}, {});
  EXPECT_EQ(b.code, 1);
  EXPECT_EQ(b.err, bad + ":5: severity 'fatal' in rule 'x' is not one of error, warning\n");
  std::remove(bad.c_str());

  // --builtin lists the built-in rules, one line each; --source prints their TOML: the two name the same rules.
  const ProcessResult list = run_process({TG_TOOL, "check-rules", "--builtin"}, {});
  const ProcessResult text = run_process({TG_TOOL, "check-rules", "--builtin", "--source"}, {});
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_EQ(text.code, 0) << text.err;
  std::size_t rules = 0, lines = 0;
  for (std::size_t at = 0; (at = text.out.find("\n[[rule]]", at)) != std::string::npos; ++at) ++rules;
  for (std::size_t at = 0; (at = list.out.find("\n  rule '", at)) != std::string::npos; ++at) ++lines;
  EXPECT_GT(rules, 0u);
  EXPECT_EQ(lines, rules) << list.out;
  EXPECT_NE(list.out.find(fmt::format("built-in rules ({};", rules)), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("rule 'fa4-1cta-dkdv'"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("[[rule]]"), std::string::npos);
  // Help names the command users run, not the internal binary.
  const ProcessResult help = run_process({TG_TOOL, "report", "--help"}, {});
  EXPECT_NE(help.out.find("Usage: tmaguard report"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("tmaguard-tool"), std::string::npos) << help.out;

  const std::string log = "/tmp/tmaguard_tool_report.jsonl";
  std::remove(log.c_str());
  for (const char* sc : {"fa4_dk_bad", "other_maps_ok"})
    run_process({TG_CLIENT, "getproc", "launch", sc}, {{"LD_PRELOAD", TG_LIB},
                                                       {"LD_LIBRARY_PATH", TG_FAKE_DIR},
                                                       {"TMAGUARD_MODE", "inspect"},
                                                       {"TMAGUARD_LOG_FORMAT", "json"},
                                                       {"TMAGUARD_LOG", log},
                                                       {"RANK", "3"}});
  const ProcessResult r = run_process({TG_TOOL, "report", log}, {});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 process summaries: 6 launches seen, 6 checked"), std::string::npos) << r.out;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_NE(r.out.find(fmt::format("fa4-dk-not-k-major                      3 {:<16}        1            3", host)),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("matmul_kernel_tma  (4 tensor maps, 1 layout(s))"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("param 7      bfloat16 dims [256,128,4,2] strides [512,65536,262144] box [64,128,1,1] swizzle 128B"),
      std::string::npos)
      << r.out;
  std::remove(log.c_str());
}

// find-maps: the maps in a dump of device memory, here Triton's device-built descriptor captured on an H200 at offset
// 256 of a zero-filled kilobyte; a bad address or an unreadable file is one line and a non-zero exit.
TEST(Tool, FindMapsInADumpOfDeviceMemory) {
  std::ifstream in(std::string(TG_SOURCE_DIR) + "/tests/data/device_built_h200.txt");
  std::string line, hex;
  while (std::getline(in, line))
    if (line.find("source=tensormap.replace_as_Triton") != std::string::npos) {
      hex = line.substr(line.find(" map=") + 5, 256);
      break;
    }
  ASSERT_EQ(hex.size(), 256u);
  std::vector<char> dump(1024, 0);
  for (std::size_t i = 0; i < 128; ++i) dump[256 + i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  const std::string file = "/tmp/tmaguard_tool_dump.bin";
  std::ofstream(file, std::ios::binary).write(dump.data(), static_cast<std::streamsize>(dump.size()));
  const ProcessResult r = run_process({TG_TOOL, "find-maps", file, "--address", "0x7fc54e100000", "--json"}, {});
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // exactly one line: one map
  EXPECT_EQ(j["offset"], 256);
  EXPECT_EQ(j["map_address"], "0x7fc54e100100");
  EXPECT_EQ(j["tensor_map"]["dims"], nlohmann::json::parse("[128,512,4,2]"));
  const ProcessResult t = run_process({TG_TOOL, "find-maps", file, "--address", "0x7fc54e100000"}, {});
  EXPECT_NE(t.out.find("1 tensor map(s) in 1024 bytes from 0x7fc54e100000"), std::string::npos) << t.out;
  std::fill(dump.begin(), dump.end(), 0);
  std::ofstream(file, std::ios::binary).write(dump.data(), static_cast<std::streamsize>(dump.size()));
  const ProcessResult none = run_process({TG_TOOL, "find-maps", file, "--address", "0x7fc54e100000"}, {});
  EXPECT_NE(none.out.find("0 tensor map(s) in 1024 bytes"), std::string::npos) << none.out;
  const ProcessResult bad = run_process({TG_TOOL, "find-maps", file, "--address", "0x7fzz"}, {});
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.find("find-maps: --address 0x7fzz: not a number"), 0u) << bad.err;
  const ProcessResult missing = run_process({TG_TOOL, "find-maps", "/nonexistent/dump.bin"}, {});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "find-maps: /nonexistent/dump.bin: cannot be read\n");
  std::remove(file.c_str());
}

TEST(Explainer, FailedEncodesExplainedSuspiciousOnesWarnedOnceCodesUnchanged) {
  const ClientRun r = run_client({"getproc", "launch", "encode_suspicious"}, {{"TMAGUARD_MODE", "log"}});
  ASSERT_TRUE(r.p.exited && r.p.code == 0) << describe(r);
  EXPECT_EQ(r.p.out,
            "ENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=0\nENCODE rc=1\nENCODE rc=0\n")
      << "the driver's return codes pass through unchanged";
  std::vector<std::string> warnings;
  for (const auto& e : r.events("encode-warning")) warnings.push_back(e["message"]);
  const std::string p = "cuTensorMapEncodeTiled accepted, but ";
  // A stride of 0, overlapping rows and a box larger than the tensor are how broadcast views, sliding windows and
  // short sequences are loaded: no warning at encode (a rule's distinct_elements check judges the maps stored to).
  ASSERT_EQ(warnings.size(), 3u) << "NULL, host pointer, past the allocation; each once\n" << describe(r);
  EXPECT_EQ(warnings[0], p + "globalAddress is NULL: the driver encodes it, every access through the map faults");
  EXPECT_EQ(warnings[1].rfind(p + "globalAddress 0x", 0), 0u);
  EXPECT_NE(warnings[1].find("is not memory the CUDA driver allocated"), std::string::npos);
  EXPECT_EQ(warnings[2], p + "the map spans [0x7e0000000000, 0x7e0000004000), 12288 bytes past the end of its "
                             "allocation [0x7e0000000000, 0x7e0000001000)");
  const auto rejected = r.events("encode-rejected");
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0]["message"],
            "cuTensorMapEncodeTiled returned 1 (CUDA_ERROR_INVALID_VALUE): boxDim[0]=128 x 2 B "
            "= 256 B exceeds the 128B swizzle span (128 B)");
}

// A log is someone else's input: records whose fields are of the wrong type are skipped and counted (never an
// uncaught exception), and control characters in names (ESC, BEL, BS, DEL) reach the terminal escaped.
TEST(Report, HostileRecordsAreSkippedAndCountedAndControlCharactersEscaped) {
  const std::string log = write_file("hostile.jsonl",
                                     "{\"event\":\"violation\",\"rule\":\"r\\u001b[31m\",\"kernel\":42,\"rank\":{}}\n"
                                     "{\"event\":\"inspect\",\"kernel\":\"k\",\"tensor_maps\":\"many\"}\n"
                                     "{\"event\":\"inspect\",\"kernel\":\"k\\u0007\",\"tensor_maps\":[{\"param_index\":\"x\"}]}\n"
                                     "{\"event\":\"census\",\"kernel\":\"k\",\"large_params\":7}\n"
                                     "{\"event\":\"summary\",\"violations\":[1,2],\"launches_seen\":\"3\"}\n"
                                     "{\"event\":\"summary\",\"violations\":{\"r\\u0008\\u007f\":\"x\"}}\n"
                                     "{\"event\":\"warning\",\"rule\":\"ok-rule\",\"kernel\":\"good\\u001b]0;title\\u0007\","
                                     "\"host\":\"h\\u009b\"}\n"
                                     "{\"event\":7}\n");
  const ProcessResult r = run_process({TG_TOOL, "report", log}, {});
  EXPECT_TRUE(r.exited) << r.err;
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  for (const char c : {'\x1b', '\x07', '\x08', '\x7f'}) EXPECT_EQ(r.out.find(c), std::string::npos) << int(c) << r.out;
  EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("r\\x1b[31m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("good\\x1b]0;title\\x07"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped: 0 line(s) that are not JSON records, "), std::string::npos) << r.out;
  std::remove(log.c_str());
}

}  // namespace
