// tmaguard shim: lazy initialisation state machine, stopping before the first launch, and the exit reports.
#include "runtime/runtime.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include "process/counters.h"
#include "process/hash_key.h"
#include "driver/driver.h"
#include "report/reporter.h"
#include "process/settings.h"
#include "process/init_state.h"
#include "process/stderr_io.h"
#include "tmaguard/records.h"
#include "tmaguard/rules.h"
#include "tmaguard_version.h"

namespace tmaguard {
namespace {

// Which build this is, findable in the file itself (`tmaguard --version` reads it; so does
// `strings libtmaguard.so | grep tmaguard`): kept by `used`, never referenced, costs nothing at run time.
[[gnu::used]] const char kBuildMarker[] = "@(#)tmaguard " TMAGUARD_VERSION " " TMAGUARD_REVISION;

// The rules in force: written once by the initialising thread, then read-only. Deliberately never freed: other
// threads read it without a lock until the process ends, exit handlers included.
const std::shared_ptr<const RuleSet>* g_rules = nullptr;

// Something tmaguard cannot understand stops the job before its first launch, with one line naming it and the
// way out: a guard that switched itself off in silence would let every bad launch through.
[[noreturn]] void stop_before_first_launch(const std::string& what, const std::string& remedy) {
  write_stderr_line("tmaguard: stopping the job before its first launch: " + what + "; " + remedy, Notice::kStop);
  std::_Exit(78);
}

// What a rules file changes besides adding rules (a built-in rule it replaces): said once the log is open.
std::vector<std::string>& rules_notices() {
  static std::vector<std::string>* v = new std::vector<std::string>;  // read by init() alone
  return *v;
}
void rules_notice(const std::string& n) { rules_notices().push_back(n); }

// The rules in force: the built-in preset, then TMAGUARD_RULES files (a rule with the same id replaces the
// preset's). A broken file never leaves a job silently unguarded: the job stops here, before its first launch,
// unless TMAGUARD_RULES_ON_ERROR=continue (then it runs without that file, after saying so).
std::shared_ptr<const RuleSet> load_rules(const Config& cfg) {
  std::vector<std::shared_ptr<const RuleSet>> sets;
  if (cfg.builtin_rules) sets.push_back(parse_rules(builtin_rules_text(), "built-in rules").rules);
  for (const std::string& path : cfg.rules_files) {
    const RulesResult res = load_rules_file(path);
    for (const std::string& e : res.errors) write_stderr_line("tmaguard: rules error: " + e, Notice::kRulesError);
    if (!res.errors.empty() && !cfg.continue_on_rules_error)
      stop_before_first_launch("fix " + path + " (tmaguard check-rules)",
                               "or set TMAGUARD_RULES_ON_ERROR=continue to run without it");
    if (!res.errors.empty())
      write_stderr_line("tmaguard: continuing without " + path + " (TMAGUARD_RULES_ON_ERROR=continue)", Notice::kRulesError);
    for (const std::string& n : res.notices) rules_notice(n);
    sets.push_back(res.rules);
  }
  return merge_rules(sets);
}

// Whether some rule in force, or tmaguard itself, can report this finding id.
bool known_finding_id(const RuleSet& rules, const std::string& id) {
  for (const ReportedId& r : reported_ids(rules))
    if (r.id == id) return true;
  for (const FindingKind& k : finding_kinds()) {
    const std::string_view kid = k.id;
    if (kid == id) return true;
    constexpr std::string_view kRulePrefix = "<rule id>";  // <rule>-map-missing, <rule>-map-undecodable
    if (kid.rfind(kRulePrefix, 0) == 0) {
      const std::string_view suffix = kid.substr(kRulePrefix.size());
      if (id.size() > suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
    }
  }
  return false;
}

// Everything is built before anything is published: a failure on any path leaves no global state behind.
bool init() {
  const ConfigResult& parsed = settings();
  const Config& cfg = parsed.config;
  if (cfg.mode == Mode::kOff) return false;  // switched off on purpose: nothing else is read
  for (const std::string& e : parsed.errors)
    stop_before_first_launch(e, "fix it (tmaguard --help lists every variable), or set TMAGUARD_MODE=off to run "
                                "without tmaguard");
  for (const std::string& n : parsed.notices) write_stderr_line("tmaguard: " + n, Notice::kSettingWarning);
  std::shared_ptr<const RuleSet> rules = load_rules(cfg);
  if (!real_function(EntryId::cuLaunchKernel)) {
    report_cannot_work(std::string("no usable CUDA driver at '") + driver_path() + "'");
    return false;
  }
  if (!real_function(EntryId::cuFuncGetParamInfo) || !real_function(EntryId::cuKernelGetParamInfo)) {
    report_cannot_work("the CUDA driver lacks cuFuncGetParamInfo/cuKernelGetParamInfo (needs a CUDA 12.4+ driver)");
    return false;
  }
  if (!counters_init()) {
    report_cannot_work("cannot create a thread-specific key");
    return false;
  }
  std::string why;
  if (!reporter_open(cfg, &why)) {
    report_cannot_work(why);
    return false;
  }
  draw_hash_key();  // before the first launch key: keys are made only once armed
  for (const std::string& n : rules_notices()) report_notice(Notice::kRulesReplaced, n, n);
  for (const Suppression& s : cfg.suppress)  // a suppression of an id nothing reports is a typo that hides nothing
    if (!known_finding_id(*rules, s.rule))
      stop_before_first_launch(
          std::string(kVariable.suppress) + " names '" + s.rule + "', which no rule in force reports",
          "fix the id (tmaguard-tool findings lists the built-in ones)");
  fleet_arm(cfg);
  g_rules = new std::shared_ptr<const RuleSet>(std::move(rules));
  g_launch_globals.mode.store(cfg.mode, std::memory_order_relaxed);
  refresh_memo_gate();
  // Once per process image: a child that re-initialises (it was forked while its parent initialised) inherits
  // what its parent registered before the fork. (Fork handling: fork_locks.h; each module registers its lock.)
  static std::atomic<bool> registered{false};
  if (!registered.exchange(true)) std::atexit(report_summary_at_exit);
  return !cannot_work_said();
}

}  // namespace

namespace detail {

// The thread running init(): a wrapper it reaches (tmaguard's own driver calls never do, but a driver callback
// might) passes through instead of waiting for itself.
thread_local bool t_initialising __attribute__((tls_model("initial-exec"))) = false;

bool armed_slow() {
  using Clock = std::chrono::steady_clock;
  // Waiting is bounded: a loader-lock cycle (a library constructor launching while another thread initialises
  // tmaguard) must not hang the job. Initialisation takes milliseconds; a minute means something is stuck.
  constexpr auto kWaitLimit = std::chrono::seconds(60);
  Clock::time_point deadline{};
  for (;;) {
    uint64_t s = init_state();
    if (s == kArmed) return true;
    if (s == kDisabled) return false;
    if (s == kUninit) {
      if (!begin_init(s)) continue;
      t_initialising = true;
      bool ok = false;
      try {
        ok = init();
      } catch (const std::exception& e) {
        report_cannot_work(std::string("initialisation failed: ") + e.what());
      }
      t_initialising = false;
      return end_init(ok);
    }
    // Another thread initialises.
    if (t_initialising) return false;
    if (initing_pid(s) != static_cast<long>(getpid())) {
      // Forked while a thread of the parent was initialising: that thread does not exist here. Start over.
      restart_init(s);
      continue;
    }
    const Clock::time_point now = Clock::now();
    if (deadline == Clock::time_point{}) deadline = now + kWaitLimit;
    if (now > deadline) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        write_stderr_line(
            "tmaguard: warning: initialisation on another thread has not finished after 60 s; launches pass "
            "unchecked until it does");
      return false;
    }
    const timespec pause{0, 50 * 1000};
    nanosleep(&pause, nullptr);
  }
}

std::atomic<void (*)()> g_nested_report{nullptr};

void nested_launches_unreported() {
  if (auto report = g_nested_report.load(std::memory_order_acquire)) report();
  this_thread_words().nested_unreported = 0;  // (launches counted while it was said are in the summary's count)
}

}  // namespace detail

void on_nested_launches(void (*report)()) { detail::g_nested_report.store(report, std::memory_order_release); }

const RuleSet& rules() { return **g_rules; }
const Config& config() { return settings().config; }

}  // namespace tmaguard
