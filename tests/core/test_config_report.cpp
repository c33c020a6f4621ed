// Configuration parsing and the report schema (text and JSON lines).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "tmaguard/config.h"
#include "tmaguard/records.h"
#include "tmaguard/rules.h"
#include "../processes/mode_values.h"

using namespace tmaguard;

namespace {
ConfigResult parse(const std::map<std::string, std::string>& env) {
  return parse_config([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST(Config, Defaults) {
  const ConfigResult r = parse({});
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.config.mode, Mode::kAbort);
  EXPECT_EQ(r.config.format, LogFormat::kText);
  EXPECT_TRUE(r.config.log_path.empty());
}

TEST(Config, ValuesAndRank) {
  const ConfigResult r = parse({{"TMAGUARD_MODE", "reject"},
                                {"TMAGUARD_LOG_FORMAT", "json"},
                                {"TMAGUARD_LOG", "/tmp/tg.%p.log"},
                                {"LOCAL_RANK", "3"}});
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.config.mode, Mode::kReject);
  EXPECT_EQ(r.config.format, LogFormat::kJson);
  EXPECT_EQ(r.config.rank, "");
  EXPECT_EQ(r.config.local_rank, "3");
  EXPECT_EQ(parse({{"RANK", "7"}, {"LOCAL_RANK", "3"}}).config.rank, "7");
}

// Ranks from every common launcher, in the documented order: the launcher's own variables before Slurm's (torchrun
// and mpirun under srun set both, and theirs is the job's rank).
TEST(Config, RanksFromEveryLauncher) {
  struct Case {
    std::map<std::string, std::string> env;
    std::string rank, local, from;
  };
  const std::vector<Case> cases = {
      {{{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}}, "5", "1", "SLURM_PROCID"},
      {{{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}}, "6", "2", "OMPI_COMM_WORLD_RANK"},
      {{{"PMI_RANK", "9"}}, "9", "", "PMI_RANK"},
      {{{"PMIX_RANK", "11"}}, "11", "", "PMIX_RANK"},
      {{{"RANK", "3"}, {"LOCAL_RANK", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}}, "3", "0", "RANK"},
      {{{"OMPI_COMM_WORLD_RANK", "4"}, {"SLURM_PROCID", "0"}}, "4", "", "OMPI_COMM_WORLD_RANK"},
      {{{"RANK", " "}, {"SLURM_PROCID", "2"}}, "2", "", "SLURM_PROCID"},
  };
  for (const Case& c : cases) {
    const ConfigResult r = parse(c.env);
    EXPECT_EQ(r.config.rank, c.rank) << c.from;
    EXPECT_EQ(r.config.local_rank, c.local) << c.from;
    EXPECT_EQ(r.config.rank_from, c.from);
  }
}

TEST(Config, BadValuesGiveOneLineNamingTheVariable) {
  const ConfigResult r = parse({{"TMAGUARD_MODE", "abrot"}, {"TMAGUARD_LOG_FORMAT", "xml"}, {"TMAGUARD_LOG", ""},
                                {"TMAGUARD_BUILTIN_RULES", "maybe"}});
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0], "TMAGUARD_MODE='abrot' is not one of abort, reject, log, inspect, off");
  EXPECT_EQ(r.errors[1], "TMAGUARD_LOG_FORMAT='xml' is not one of text, json");
  EXPECT_EQ(r.errors[2], "TMAGUARD_BUILTIN_RULES='maybe' is not one of on, off");
}

// Values that are unambiguous are taken: any case, surrounding spaces, the usual spellings of on and off; an empty
// value is the default. None of them may switch the guard off.
TEST(Config, UnambiguousSpellingsAreAccepted) {
  ConfigResult r = parse({{"TMAGUARD_MODE", "Reject"},
                          {"TMAGUARD_LOG_FORMAT", " JSON\t"},
                          {"TMAGUARD_BUILTIN_RULES", "0"},
                          {"TMAGUARD_RULES_ON_ERROR", "Continue"},
                          {"TMAGUARD_LOG", ""}});
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.config.mode, Mode::kReject);
  EXPECT_EQ(r.config.format, LogFormat::kJson);
  EXPECT_FALSE(r.config.builtin_rules);
  EXPECT_TRUE(r.config.continue_on_rules_error);
  EXPECT_TRUE(r.config.log_path.empty());
  r = parse({{"TMAGUARD_MODE", "reject "}, {"TMAGUARD_BUILTIN_RULES", "TRUE"}, {"TMAGUARD_LIBCUDA", "  "}});
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.config.mode, Mode::kReject);
  EXPECT_TRUE(r.config.builtin_rules);
  for (const char* off : {"off", "false", "no", "0", "OFF"})
    EXPECT_FALSE(parse({{"TMAGUARD_BUILTIN_RULES", off}}).config.builtin_rules) << off;
}

namespace {
std::string source_file(const char* path) {
  std::ifstream in(std::string(TG_SOURCE_DIR) + "/" + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

// The reference's table of variables is the one the typed declarations generate.
TEST(Config, ReferenceTableIsTheDeclaredOne) {
  EXPECT_NE(source_file("docs/reference.md").find(flags_markdown_table()), std::string::npos)
      << "docs/reference.md must carry this table (tmaguard-tool env --markdown prints it):\n"
      << flags_markdown_table();
  EXPECT_EQ(flags().size(), 16u);
  EXPECT_EQ(flags()[0].values, "abort|reject|log|inspect|off");  // a choice flag's values come from its choices
}

// A bad --mode or TMAGUARD_MODE names every mode, from the same table.
TEST(Config, EveryModeIsNamedInTheError) {
  const ConfigResult r = parse({{"TMAGUARD_MODE", "strict"}});
  ASSERT_EQ(r.errors.size(), 1u);
  for (const char* m : {"abort", "reject", "log", "inspect", "off"}) EXPECT_NE(r.errors[0].find(m), std::string::npos);
}

// One table of finding ids (findings.inc): what the built-in rules can report is in it, with the severity they report
// it at, and nothing in it is stale; the reference list is generated from it.
TEST(Findings, EveryIdTheBuiltInRulesReportIsARowWithItsSeverity) {
  const RulesResult builtin = parse_rules(builtin_rules_text(), "built-in");
  ASSERT_TRUE(builtin.errors.empty());
  const std::vector<ReportedId> reported = reported_ids(*builtin.rules);
  ASSERT_GT(reported.size(), 20u);
  for (const ReportedId& r : reported) {
    const auto row = std::find_if(finding_kinds().begin(), finding_kinds().end(),
                                  [&](const FindingKind& k) { return r.id == k.id; });
    ASSERT_NE(row, finding_kinds().end()) << r.id << " is reported by the built-in rules but not in findings.inc";
        EXPECT_EQ(row->severity, r.severity == Severity::kError ? SeverityRule::kError : SeverityRule::kWarning) << r.id;
  }
  for (const FindingKind& k : finding_kinds()) {
    if (std::string(k.id).rfind("fa4-", 0) != 0) continue;
    EXPECT_TRUE(std::any_of(reported.begin(), reported.end(), [&](const ReportedId& r) { return r.id == k.id; }))
        << k.id << " is in findings.inc but no built-in rule reports it";
  }
  EXPECT_EQ(finding_id(FindingId::kRuleMapMissing, "my-rule"), "my-rule-map-missing");
  EXPECT_EQ(finding_id(FindingId::kTmapNullAddress), "tmap-null-address");
}

// A generic finding is made at its row's severity: the column is what the code reports, not only what the docs say.
TEST(Findings, AGenericFindingTakesItsRowsSeverity) {
  for (const FindingKind& k : finding_kinds()) {
    const Finding f = make_finding(k.which, "kernel", "param 0", nullptr);
    EXPECT_EQ(f.rule, finding_id(k.which)) << k.id;
    EXPECT_EQ(f.severity, k.severity == SeverityRule::kWarning ? Severity::kWarning : Severity::kError) << k.id;
  }
  EXPECT_EQ(make_finding(FindingId::kTmapUnknownElementType, "k", "t", nullptr).severity, Severity::kWarning);
  EXPECT_EQ(make_finding(FindingId::kTmapNullAddress, "k", "t", nullptr).severity, Severity::kError);
}

// What a finding does: none for a warning; an error's rule action, else the mode's; inspect mode never blocks.
TEST(Findings, TheActionIsTheRulesElseTheModes) {
  Finding error = make_finding(FindingId::kTmapNullAddress, "k", "t", nullptr);
  Finding warning = make_finding(FindingId::kTmapUnknownElementType, "k", "t", nullptr);
  EXPECT_EQ(action_in_mode(error, Mode::kAbort), Action::kAbort);
  EXPECT_EQ(action_in_mode(error, Mode::kReject), Action::kReject);
  EXPECT_EQ(action_in_mode(error, Mode::kLog), Action::kLog);
  EXPECT_EQ(action_in_mode(error, Mode::kInspect), Action::kInspect);
  EXPECT_EQ(action_in_mode(warning, Mode::kAbort), Action::kNone);
  error.action = Action::kLog;
  warning.action = Action::kAbort;
  EXPECT_EQ(action_in_mode(error, Mode::kAbort), Action::kLog);
  EXPECT_EQ(action_in_mode(error, Mode::kInspect), Action::kInspect);
  EXPECT_EQ(action_in_mode(warning, Mode::kAbort), Action::kNone);
  for (const char* name : {"abort", "reject", "log"}) EXPECT_STREQ(to_string(*rule_action(name)), name);
  EXPECT_FALSE(rule_action("inspect"));
  EXPECT_FALSE(rule_action("none"));
}

// The reference's record schema is the one table writer and reader both use (record_fields.inc).
TEST(Report, ReferenceSchemaIsTheDeclaredTable) {
  EXPECT_NE(source_file("docs/reference.md").find(record_fields_markdown_table()), std::string::npos)
      << "docs/reference.md must carry this table (tmaguard-tool schema prints it):\n"
      << record_fields_markdown_table();
  std::set<std::string> keys;
  for (const RecordField& f : record_fields()) EXPECT_TRUE(keys.insert(f.key).second) << "spelled twice: " << f.key;
}

TEST(Findings, ReferenceListIsTheTable) {
  EXPECT_NE(source_file("docs/reference.md").find(findings_markdown_table()), std::string::npos)
      << "docs/reference.md must carry this list (tmaguard-tool findings prints it):\n"
      << findings_markdown_table();
}

TEST(Config, LogPathExpansion) {
  EXPECT_EQ(expand_log_path("/var/log/tg.%p.jsonl", 4242), "/var/log/tg.4242.jsonl");
  EXPECT_EQ(expand_log_path("plain", 1), "plain");
  EXPECT_EQ(expand_log_path("%p-%p%", 5), "5-5%");
}

// A rank, job id or host taken from the environment never names another directory: '/', "..", a value of dots and
// any character outside [A-Za-z0-9._+-] expand to '_'; plain values expand as they are.
TEST(Config, ExpandedFieldsNeverLeaveTheirDirectory) {
  PathContext c;
  c.pid = 7;
  c.host = "node-3.cluster";
  c.rank = "12";
  c.job = "4711.0";
  EXPECT_EQ(expand_path("/logs/%j/%h.%r.%p.jsonl", c), "/logs/4711.0/node-3.12.7.jsonl");
  for (const char* job : {"../x", "..", ".", "a/../../b", "x/y", "..x", "a\n b"}) {
    c.job = job;
    const std::string path = expand_path("/logs/%j/%h.%r.%p.jsonl", c);
    const std::string field = path.substr(6, path.find('/', 6) - 6);
    EXPECT_EQ(field.find('/'), std::string::npos) << job << " -> " << path;
    EXPECT_EQ(field.find(".."), std::string::npos) << job << " -> " << path;
    EXPECT_NE(field, ".") << job << " -> " << path;
    EXPECT_EQ(std::count(path.begin(), path.end(), '/'), 3) << job << " -> " << path;
  }
  c.job = "../x";
  c.rank = "1/../../etc";
  EXPECT_EQ(expand_path("/logs/%j/%r", c), "/logs/___x/1_______etc");
  EXPECT_EQ(path_field("1/../../etc"), "1_______etc");
  EXPECT_EQ(path_field("../x"), "___x");
  EXPECT_EQ(path_field("a.b"), "a.b");
}

// Values that a path cannot take as they are draw a notice saying what %j and %r expand to; a secure-execution
// process takes no rank or job id from the environment at all.
TEST(Config, UnsafeIdentityIsSaidAndSecureExecutionTakesNone) {
  const auto env = [](const char* n) -> const char* {
    const std::string v = n;
    if (v == "SLURM_JOB_ID") return "../x";
    if (v == "RANK") return "3";
    return nullptr;
  };
  const ConfigResult r = parse_config(env, false);
  EXPECT_EQ(r.config.job_id, "../x");
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_NE(r.notices[0].find("SLURM_JOB_ID='../x' is not a plain name: %j in a log or metrics path expands to '___x'"),
            std::string::npos)
      << r.notices[0];
  const ConfigResult secure = parse_config(env, true);
  EXPECT_TRUE(secure.config.job_id.empty());
  EXPECT_TRUE(secure.config.rank.empty());
  ASSERT_EQ(secure.notices.size(), 1u);
  EXPECT_NE(secure.notices[0].find("RANK, SLURM_JOB_ID ignored"), std::string::npos) << secure.notices[0];
}

namespace {
Finding sample() {
  Finding f;
  f.rule = "fa4-dk-not-k-major";
  f.kernel = "kernel_FlashAttentionBackwardSm100_0";
  f.tensor = "dK";
  f.place = MapPlace{8, 0};
  TensorMapView v;
  v.dtype = DataType::kBF16;
  v.rank = 2;
  v.dims = {256, 128};
  v.strides = {512};
  v.box = {64, 128};
  v.element_strides = {1, 1};
  v.swizzle = 3;
  v.address = 0x7f00;
  f.tensor_map = v;
  f.expected = "dK K-major";
  f.observed = "dK dim 0 = 256";
  f.hint = "torch.empty_like(k)";
  return f;
}
ProcessContext ctx() {
  ProcessContext c;
  c.pid = 42;
  c.tid = 43;
  c.rank = "1";
  c.time = "2026-11-29T12:00:00.000Z";
  return c;
}
}  // namespace

TEST(Report, JsonRecordCarriesTheSchema) {
  const auto j = nlohmann::json::parse(render_finding(sample(), ctx(), Action::kAbort, LogFormat::kJson));
  EXPECT_EQ(j["event"], "violation");
  EXPECT_EQ(j["rule"], "fa4-dk-not-k-major");
  EXPECT_EQ(j["severity"], "error");
  EXPECT_EQ(j["tensor"], "dK");
  EXPECT_EQ(j["param_index"], 8);
  EXPECT_EQ(j["action"], "abort");
  EXPECT_EQ(j["pid"], 42);
  EXPECT_EQ(j["tid"], 43);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["severity_text"], "ERROR");
  EXPECT_EQ(j["severity_number"], 17);
  EXPECT_EQ(j["schema"], kRecordSchema);
  EXPECT_TRUE(j.contains("timestamp") && j.contains("body"));
  EXPECT_EQ(j["body"].get<std::string>().find('\n'), std::string::npos);
  EXPECT_EQ(j["tensor_map"]["dims"], nlohmann::json({256, 128}));
  EXPECT_EQ(j["tensor_map"]["strides_bytes"], nlohmann::json({512}));
  EXPECT_EQ(j["tensor_map"]["swizzle"], "128B");
  EXPECT_EQ(j["tensor_map"]["dtype"], "bfloat16");
  EXPECT_EQ(j["tensor_map"]["address"], "0x7f00");
  EXPECT_EQ(j["hint"], "torch.empty_like(k)");
}

TEST(Report, TextIsOneLinePlusTheMap) {
  const std::string s = render_finding(sample(), ctx(), Action::kLog, LogFormat::kText);
  EXPECT_EQ(s,
            "tmaguard: violation fa4-dk-not-k-major [error] action=log kernel=kernel_FlashAttentionBackwardSm100_0 "
            "tensor=dK param=8: expected dK K-major; observed dK dim 0 = 256. Hint: torch.empty_like(k). "
            "(pid=42 tid=43 rank=1 time=2026-11-29T12:00:00.000Z)\n"
            "tmaguard:   dK tensor map: tiled bfloat16 rank 2 dims {256,128} strides_bytes {512} box {64,128} "
            "element_strides {1,1} interleave none swizzle 128B address 0x7f00 encoder driver");
}

TEST(Report, Summary) {
  Summary s;
  s.launches_seen = 10;
  s.launches_checked = 4;
  s.tensor_maps_decoded = 24;
  s.violations_by_rule["fa4-dk-not-k-major"] = 3;
  const auto j = nlohmann::json::parse(render_summary(s, ctx(), LogFormat::kJson));
  EXPECT_EQ(j["event"], "summary");
  EXPECT_EQ(j["launches_seen"], 10);
  EXPECT_EQ(j["violations"]["fa4-dk-not-k-major"], 3);
  EXPECT_EQ(render_summary(s, ctx(), LogFormat::kText),
            "tmaguard: SUMMARY: 10 launches seen, 4 checked, 24 tensor maps decoded; violations: fa4-dk-not-k-major x3 "
            "(pid=42 tid=43 rank=1 time=2026-11-29T12:00:00.000Z)");
  EXPECT_EQ(format_time_utc(1764417600123), "2025-11-29T12:00:00.123Z");
}

// In a secure-execution process (setuid and the like) the environment belongs to a less privileged user: the
// variables that name files are ignored, with one notice, and the guard stays on with its defaults.
TEST(Config, SecureExecutionIgnoresTheFilesTheEnvironmentNames) {
  const ConfigResult r = parse_config(
      [](const char* n) -> const char* {
        const std::string v = n;
        if (v == "TMAGUARD_LOG") return "/etc/shadow";
        if (v == "TMAGUARD_RULES") return "/root/rules.toml";
        if (v == "TMAGUARD_MODE") return "reject";
        return nullptr;
      },
      true);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.config.log_path.empty());
  EXPECT_TRUE(r.config.rules_files.empty());
  EXPECT_EQ(r.config.mode, Mode::kReject);
  ASSERT_EQ(r.notices.size(), 1u);
  EXPECT_EQ(r.notices[0],
            "secure-execution process (setuid or similar): TMAGUARD_LOG, TMAGUARD_RULES ignored; reports go to "
            "stderr, built-in rules only");
}

// TMAGUARD_RULES with an empty entry names no file: refused, not read as fewer rules; a variable spelled like one of
// tmaguard's but not one is said (the tmaguard command's own and the scripts' variables are not looked at).
TEST(Config, EmptyRulesEntriesAreRefusedAndMisspellingsSaid) {
  for (const char* v : {"::::", "a.toml:", ":a.toml", "a.toml::b.toml", "a.toml: :b.toml"}) {
    const ConfigResult r = parse_config([&](const char* n) { return std::string(n) == "TMAGUARD_RULES" ? v : nullptr; });
    ASSERT_EQ(r.errors.size(), 1u) << v;
    EXPECT_EQ(r.errors[0], std::string("TMAGUARD_RULES='") + v +
                               "' has an empty file name (files are separated by ':'; a file name cannot hold one)");
  }
  const std::vector<std::string> names = {"TMAGUARD_RULE",   "TMAGUARD_LOGFORMAT", "TMAGUARD_MODE", "TMAGUARD_LIB",
                                          "TMAGUARD_GPU_OUT", "TMAGUARD_BUILD_DIR", "TMAGUARD_MODES"};
  const ConfigResult r = parse_config([](const char*) -> const char* { return nullptr; }, false, &names);
  ASSERT_EQ(r.notices.size(), 3u);
  EXPECT_EQ(r.notices[0], "warning: TMAGUARD_RULE is not a tmaguard variable and is ignored (did you mean TMAGUARD_RULES?)");
  EXPECT_EQ(r.notices[1],
            "warning: TMAGUARD_LOGFORMAT is not a tmaguard variable and is ignored (did you mean TMAGUARD_LOG_FORMAT?)");
  EXPECT_EQ(r.notices[2], "warning: TMAGUARD_MODES is not a tmaguard variable and is ignored (did you mean TMAGUARD_MODE?)");
}

// The wrong case and a missing underscore are said like any other misspelling (they were ignored in silence).
TEST(Config, MisspellingsOfCaseAndUnderscoreAreSaid) {
  const std::vector<std::string> names = {"TMAGUARD_mode", "TMAGUARDMODE", "tmaguard_log"};
  const ConfigResult r = parse_config([](const char*) -> const char* { return nullptr; }, false, &names);
  ASSERT_EQ(r.notices.size(), 3u);
  EXPECT_EQ(r.notices[0], "warning: TMAGUARD_mode is not a tmaguard variable and is ignored (did you mean "
                          "TMAGUARD_MODE? names are case-sensitive)");
  EXPECT_EQ(r.notices[1],
            "warning: TMAGUARDMODE is not a tmaguard variable and is ignored (did you mean TMAGUARD_MODE?)");
  EXPECT_EQ(r.notices[2], "warning: tmaguard_log is not a tmaguard variable and is ignored (did you mean "
                          "TMAGUARD_LOG? names are case-sensitive)");
}

// Every odd value of the shared table (tests/data/mode_values.txt) reads as the table says: the tmaguard command asks
// this same parser (tmaguard-tool mode), and tests/processes/test_loopholes.cpp runs the command and the library on the table.
TEST(Config, OddModeValuesReadAsTheSharedTableSays) {
  const std::vector<ModeValue> table = read_mode_values(std::string(TG_DATA_DIR) + "/mode_values.txt");
  ASSERT_GE(table.size(), 10u);
  for (const ModeValue& m : table) {
    const ConfigResult r = parse({{"TMAGUARD_MODE", m.value}});
    if (m.expected == "error") {
      EXPECT_EQ(r.errors.size(), 1u) << m.escaped;
    } else {
      EXPECT_TRUE(r.errors.empty()) << m.escaped;
      EXPECT_EQ(to_string(r.config.mode), m.expected) << m.escaped;
    }
  }
}

TEST(Notices, EachKindHasItsOwnNameAnEventAndASeverity) {
  std::set<std::string> names;
  std::size_t n = 0;
#define TG_NOTICE(ID, NAME, EVENT, SEV, MEANING)                                                \
  {                                                                                            \
    const tmaguard::NoticeInfo& info = tmaguard::notice_info(tmaguard::Notice::ID);            \
    EXPECT_STREQ(info.name, NAME);                                                             \
    EXPECT_STREQ(info.event, EVENT);                                                           \
    EXPECT_EQ(info.severity, tmaguard::RecordSeverity::SEV);                                   \
    EXPECT_TRUE(names.insert(info.name).second) << "two kinds share the dedupe name " << NAME; \
    ++n;                                                                                       \
  }
#include "tmaguard/notices.inc"
#undef TG_NOTICE
  EXPECT_EQ(names.size(), n);
  // What a log pipeline alerts on: a stop and a broken rules file are errors; tmaguard stepping aside is a warning.
  EXPECT_EQ(tmaguard::notice_info(tmaguard::Notice::kStop).severity, tmaguard::RecordSeverity::kError);
  EXPECT_EQ(tmaguard::notice_info(tmaguard::Notice::kRulesError).severity, tmaguard::RecordSeverity::kError);
  EXPECT_EQ(tmaguard::notice_info(tmaguard::Notice::kCannotWork).severity, tmaguard::RecordSeverity::kWarn);
  const std::string json = tmaguard::render_notice(tmaguard::Notice::kStop, "x", tmaguard::ProcessContext{},
                                                   tmaguard::LogFormat::kJson);
  EXPECT_NE(json.find("\"event\":\"stop\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"severity_text\":\"ERROR\""), std::string::npos) << json;
}

TEST(Config, TheDefaultsTheTableShowsAreTheDefaultsInForce) {
  // flags.inc writes each default once, as the member's value; what the help shows is that value as its type writes
  // it (or, for an empty default, the row's "unset" text: one or the other, never both). Each value default, set
  // explicitly, gives the settings of an empty environment: the shown default reads back as the one in force.
  const Config d = parse({}).config;
  std::size_t compared = 0;
  for (const FlagInfo& f : flags()) {
    EXPECT_NE(f.default_value.empty(), std::string(f.unset).empty()) << f.name;
    EXPECT_FALSE(f.fallback().empty()) << f.name;
    if (f.default_value.empty()) continue;
    const ConfigResult r = parse({{f.name, f.default_value}});
    ASSERT_TRUE(r.errors.empty()) << f.name << "='" << f.default_value << "': " << r.errors.front();
    const Config& c = r.config;
    EXPECT_EQ(c.mode, d.mode) << f.name;
    EXPECT_EQ(c.format, d.format) << f.name;
    EXPECT_EQ(c.builtin_rules, d.builtin_rules) << f.name;
    EXPECT_EQ(c.continue_on_rules_error, d.continue_on_rules_error) << f.name;
    EXPECT_EQ(c.device_audit, d.device_audit) << f.name;
    EXPECT_EQ(c.device_read_bytes, d.device_read_bytes) << f.name;
    EXPECT_EQ(c.stack, d.stack) << f.name;
    EXPECT_EQ(c.summary_interval_s, d.summary_interval_s) << f.name;
    EXPECT_EQ(c.repair_large_tensor_flag, d.repair_large_tensor_flag) << f.name;
    ++compared;
  }
  EXPECT_EQ(compared, 9u) << "a variable with a value default was added: compare its member here";
}
