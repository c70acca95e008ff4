// `cellar-bench all`: runs the put, http, relay, trigger, index and pipeline benchmarks
// one after the other and writes their headline figures, each next to the
// baseline measured in the same run, to a markdown file (BENCHMARKS.md).
//
// Contract:
//   - Every benchmark runs as a child process of this very binary
//     (/proc/self/exe <name> [sizes] [--config X]), in the order above;
//     --only picks a subset (the order stays), --quick passes smaller sizes
//     (a smoke run, about a minute per benchmark). Without --config every
//     child starts its own private MariaDB (and Kafka broker) and removes it
//     when done; with --config all of them run against that running cluster.
//   - A child's stdout is forwarded live to ours and captured; its stderr is
//     ours. Its last non-empty stdout line must be its JSON line (the output
//     contract of every subcommand, bench_common.h). A child that exits
//     non-zero, is killed or ends without a JSON line gets a "failed (exit N)"
//     row (and counts as failed), and the next benchmark runs anyway.
//   - Children run in their own process group, so a Ctrl-C at the terminal
//     reaches only this process. On the first SIGINT/SIGTERM it sends SIGTERM
//     to the running child (which stops gracefully and removes its private
//     MariaDB), waits for it and runs no further benchmark; --out is then left
//     as it was. Should this process die, the child gets SIGTERM
//     (PR_SET_PDEATHSIG).
//   - Output: --out (markdown: date, cores, load average, command line, one
//     table of benchmark / figure / value / baseline / ratio / target, the
//     settings and every child's JSON line), the same table on stdout and, as
//     the last stdout line, {"bench":"all","out":<path or null>,"failed":[...]}.
//   - Exit code: 0 every benchmark passed, 1 one failed or --out could not be
//     written, 130 interrupted.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_all_child.h"
#include "bench/bench_all_figures.h"
#include "bench/bench_common.h"
#include "testing/kafka_broker.h"

namespace cellar::bench {
namespace {

// Keys stay in the order the benchmark printed them.
using Json = nlohmann::ordered_json;

struct AllOptions {
  std::string config_path;  // empty: each child starts its own private MariaDB
  std::string out = "BENCHMARKS.md";
  std::vector<std::string> only;  // empty: every benchmark
  bool quick = false;
  bool mock_broker = false;  // passed on: librdkafka's mock instead of Apache Kafka
};

// One benchmark of the run and the sizes it is given.
struct BenchSpec {
  std::string name;
  // A full run (about 15-20 minutes in all on 2 cores; pipeline's 30 s steps
  // stop at the first one not sustained): every benchmark's own defaults are
  // small enough, so no sizes are passed (only put's --single-row-baseline,
  // which one of its targets is judged against).
  std::vector<std::string> full_args;
  // --quick: about 30-60 s each, private MariaDB start-up included.
  std::vector<std::string> quick_args;
  // What its baseline is, for the notes under the table.
  std::string baseline_note;
};

const std::vector<BenchSpec>& AllBenches() {
  static const std::vector<BenchSpec> kBenches = {
      {"put",
       {"--single-row-baseline", "--bare-group-commit"},
       {"--cells", "10000", "--raw-rounds", "1", "--single-row-baseline", "--bare-group-commit"},
       "baseline = raw multi-row INSERTs (100 rows each) into the host tables on the same server, "
       "the median of its rounds; single puts and put_batch likewise count the median of 3 rounds; "
       "the store's phases follow an untimed warm-up (5,000 single puts "
       "and 5,000 put_batch cells: connected writers with their statements prepared, as the "
       "baseline's median round follows a first round); targets: group-committed single puts "
       "reach half of it and twice "
       "single-row autocommit INSERTs, put_batch 0.8 of it, p99 <= 20 ms at half the put rate; "
       "the ceiling is the host-log design in plain SQL (one autocommit 32-row INSERT ... "
       "RETURNING per transaction, its first row locking the writer's fence row: what the group "
       "commit sends); the closed-loop ceiling is the same SQL with only as many rows in flight "
       "as there are callers (what callers blocked in Put() can offer), over one connection or "
       "the writer threads' count, whichever is faster (the put_batch closed-loop ceiling "
       "likewise, with the C x 10 rows put_batch callers offer); the bare group commit is the "
       "same callers, each blocked on one pre-encoded row, through a queue, the writers' "
       "statement and one wake-up per batch, with no Cellar code: the bound of any group commit "
       "for blocked callers on the machine; async "
       "puts are the same callers each keeping 8 PutAsync calls in flight."},
      {"http",
       {},
       {"--cells", "1000", "--gets", "2000"},
       "baseline = the same puts, gets and latest, row and versions reads through the "
       "in-process `CellStore`; ratio = HTTP / in process. Bare SQL gets: the same gets "
       "against a bare cpp-httplib server that runs the store's SELECT and answers a cell's "
       "JSON, in rounds alternating with in-process gets of their own: the bound of any HTTP "
       "get with this library on the machine."},
      {"relay",
       {},
       {"--cells", "5000", "--seconds", "3"},
       "events/s baseline = a bare librdkafka producer of the same payloads, and the same "
       "cluster's blocking single puts/s (32 callers); latency baseline = the Kafka path alone "
       "(bare producer to the same consumer settings)."},
      {"trigger",
       {},
       {"--cells", "5000", "--rate", "500", "--seconds", "3"},
       "events/s baseline = a bare `ChangeLogConsumer`; latency baseline = commit-ack to "
       "consume of a bare consumer alongside the worker (relay + Kafka)."},
      {"index",
       {},
       {"--seconds", "3", "--apply-cells", "1000", "--entries", "100000", "--drivers", "500",
        "--queries", "500"},
       "lag baseline = commit-ack to consume of a bare consumer of the same cells (relay + "
       "Kafka; the rest is the index worker). query baseline = the same SQL text through a raw "
       "`MysqlConnection`; the ratio is `IndexReader::Query` latency as a multiple of that "
       "(1.10x = 1.10x of raw SQL). Group-apply upserts/s (`IndexWriter::ApplyBatch` in the "
       "worker's lanes) against the same cluster's blocking single puts/s (32 callers)."},
      {"pipeline",
       {},
       {"--steps", "500,1000,2000", "--step-seconds", "3", "--drain-cells", "5000", "--raw-rows",
        "10000", "--raw-rounds", "1"},
       "baseline = raw multi-row INSERTs (100 rows each) into the host tables on the same server "
       "(median round); ratio = the highest write rate the relay, index worker and both triggers "
       "sustain together (p99s < 100 ms, no lag growing) / raw rows/s. Stage events/s come from "
       "a backlog each stage works through alone. The plain-SQL ceiling runs the statements the "
       "stages send for the same writes (per 100 writes the put INSERT and the index worker's "
       "transaction, per 1,000 the relay's page read and checkpoint) with no Kafka and no Cellar "
       "code: what the database work alone allows on the same server."},
  };
  return kBenches;
}

const BenchSpec* FindBench(const std::string& name) {
  for (const BenchSpec& spec : AllBenches())
    if (spec.name == name) return &spec;
  return nullptr;
}

std::vector<std::string> BenchNames() {
  std::vector<std::string> names;
  for (const BenchSpec& spec : AllBenches()) names.push_back(spec.name);
  return names;
}

// ---- Small facts about the run ----------------------------------------------

std::string ErrnoText() { return std::strerror(errno); }

// "2026-11-22 05:44" in UTC.
std::string UtcNowText() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// The 1, 5 and 15 minute load averages ("1.23 0.98 0.80"), "n/a" when unreadable.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "n/a";
  return one + " " + five + " " + fifteen;
}

Result<std::string> SelfExecutable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Internal("readlink /proc/self/exe: " + ErrnoText());
  return std::string(buf, static_cast<size_t>(n));
}

// `arg` as a shell would need it ('...' around anything unusual).
std::string ShellQuote(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_./=,:+-@%") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string JoinQuoted(const std::vector<std::string>& args) {
  std::string line;
  for (const std::string& a : args) line += (line.empty() ? "" : " ") + ShellQuote(a);
  return line;
}

// This process's command line as typed (argv[0] as given).
std::string OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < raw.size()) {
    const size_t end = raw.find('\0', start);
    args.push_back(raw.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args.empty() ? "cellar-bench all" : JoinQuoted(args);
}

// The last non-empty line of `text` as a JSON object; nullopt when it is not one.
std::optional<Json> LastLineJson(const std::string& text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t newline = text.rfind('\n', end - 1);
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    const std::string line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) return std::nullopt;
      return j;
    }
    end = start == 0 ? 0 : start - 1;
  }
  return std::nullopt;
}

// ---- One benchmark's outcome ------------------------------------------------

struct BenchRun {
  std::string name;
  std::string command;       // as a user would type it
  std::optional<Json> json;  // the child's JSON line, when it printed one
  std::string failure;       // empty: passed; else "failed (exit 1)" etc.
  bool interrupted = false;
  double seconds = 0;
};

std::string FailureText(const ChildExit& e, bool has_json) {
  if (e.sent_sigterm) {
    return "interrupted (" +
           (e.signal ? "signal " + std::to_string(e.signal)
                     : "exit " + std::to_string(e.exit_code)) +
           ")";
  }
  if (e.signal != 0) return "failed (signal " + std::to_string(e.signal) + ")";
  if (e.exit_code != 0) return "failed (exit " + std::to_string(e.exit_code) + ")";
  if (!has_json) return "failed (exit 0, no JSON line)";
  return "";
}

std::vector<std::string> ChildArgs(const BenchSpec& spec, const AllOptions& o) {
  std::vector<std::string> args = {spec.name};
  const auto& sizes = o.quick ? spec.quick_args : spec.full_args;
  args.insert(args.end(), sizes.begin(), sizes.end());
  if (o.mock_broker) args.push_back("--mock-broker");
  if (!o.config_path.empty()) {
    args.push_back("--config");
    args.push_back(o.config_path);
  }
  return args;
}

BenchRun RunBench(const std::string& exe, const BenchSpec& spec, const AllOptions& o) {
  const std::vector<std::string> args = ChildArgs(spec, o);
  BenchRun run;
  run.name = spec.name;
  run.command = "cellar-bench " + JoinQuoted(args);
  std::vector<std::string> argv = {exe};
  argv.insert(argv.end(), args.begin(), args.end());
  Progress("all: running " + run.command);
  Stopwatch clock;
  Result<ChildExit> exit = RunChild(argv);
  run.seconds = clock.Seconds();
  if (!exit.ok()) {
    run.failure = "failed (" + exit.status().ToString() + ")";
    return run;
  }
  run.json = LastLineJson(exit->stdout_text);
  run.failure = FailureText(*exit, run.json.has_value());
  run.interrupted = exit->sent_sigterm;
  Progress("all: " + spec.name + (run.failure.empty() ? " done" : " " + run.failure) + " in " +
           FormatNumber(run.seconds, 1) + " s");
  return run;
}

// ---- Figures ------------------------------------------------------------------

std::vector<FigureRow> FigureRows(const BenchRun& run) {
  if (!run.failure.empty() || !run.json) return {{run.failure, "", "", "", ""}};
  return BenchFigureRows(run.name, *run.json);
}

// ---- The report -----------------------------------------------------------------

struct Report {
  std::string started_utc, finished_utc;
  std::string load_at_start, load_at_end;
  unsigned cores = 0;
  std::string command_line;
  std::string cluster;
  double seconds = 0;
  std::vector<BenchRun> runs;
};

std::string MarkdownTable(const std::vector<BenchRun>& runs) {
  std::string md =
      "| benchmark | figure | value | baseline (same run) | ratio | target |\n"
      "| --- | --- | ---: | ---: | ---: | --- |\n";
  for (const BenchRun& run : runs) {
    for (const FigureRow& r : FigureRows(run)) {
      md += "| " + run.name + " | " + r.figure + " | " + r.value + " | " + r.baseline + " | " +
            r.ratio + " | " + r.target + " |\n";
    }
  }
  return md;
}

// What "baseline" and "ratio" mean for the benchmarks that ran.
std::string BaselineNotes(const std::vector<BenchRun>& runs) {
  std::string md =
      "Ratio = value / baseline, both measured in the same run on the same servers:\n\n";
  for (const BenchRun& run : runs)
    if (const BenchSpec* spec = FindBench(run.name))
      md += "- **" + run.name + "**: " + spec->baseline_note + "\n";
  return md;
}

std::string RenderMarkdown(const Report& r) {
  std::string md = "# Cellar benchmarks\n\n";
  md +=
      "Written by `cellar-bench all`; rerun it to refresh this file. Where a write's CPU "
      "goes, stage by stage, and what was cut: [docs/cost-per-write.md]"
      "(docs/cost-per-write.md).\n\n";
  md += "- date: " + r.started_utc + " UTC (finished " + r.finished_utc + " UTC, " +
        FormatNumber(r.seconds / 60, 1) + " min)\n";
  md += "- machine: " + std::to_string(r.cores) + " cores (nproc)\n";
  md += "- load average (1/5/15 min): " + r.load_at_start + " at start, " + r.load_at_end +
        " at end\n";
  md += "- command: `" + r.command_line + "`\n";
  md += "- cluster: " + r.cluster + "\n\n";
  md += MarkdownTable(r.runs) + "\n" + BaselineNotes(r.runs) + "\n";
  md += "## Settings\n\n";
  for (const BenchRun& run : r.runs) {
    md += "- **" + run.name + "** (`" + run.command + "`, " + FormatNumber(run.seconds, 0) +
          " s): " + (run.json ? SettingsText(*run.json) : run.failure) + "\n";
  }
  md += "\n## JSON lines\n";
  for (const BenchRun& run : r.runs) {
    md += "\n" + run.name + ":\n\n```json\n" + (run.json ? run.json->dump() : "(none)") + "\n```\n";
  }
  return md;
}

// Writes `text` to `path` through a temporary file, so a failed write leaves
// the old file as it was.
Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Unavailable("cannot open " + tmp + ": " + ErrnoText());
    out << text;
    out.flush();
    if (!out) return Unavailable("cannot write " + tmp + ": " + ErrnoText());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = ErrnoText();
    std::remove(tmp.c_str());
    return Unavailable("cannot rename " + tmp + " to " + path + ": " + error);
  }
  return Status::Ok();
}

// "12,345 (baseline 23,456, 0.53x; target >= 0.5 (met))"
std::string ConsoleValue(const FigureRow& r) {
  std::string extra;
  if (!r.baseline.empty()) extra = "baseline " + r.baseline + ", " + r.ratio;
  if (!r.target.empty()) extra += (extra.empty() ? "target " : "; target ") + r.target;
  return r.value + (extra.empty() ? "" : "  (" + extra + ")");
}

void PrintConsoleTable(const Report& r) {
  Table t("cellar-bench all");
  t.Add("cores", std::to_string(r.cores));
  t.Add("load average at start / end", r.load_at_start + " / " + r.load_at_end);
  t.Add("cluster", r.cluster);
  for (const BenchRun& run : r.runs) {
    t.Section(run.name + " (" + FormatNumber(run.seconds, 0) + " s)");
    for (const FigureRow& row : FigureRows(run)) {
      if (row.value.empty())
        t.Add("result", row.figure);
      else
        t.Add(row.figure, ConsoleValue(row));
    }
  }
  t.Print();
}

// ---- The command ----------------------------------------------------------------

std::vector<const BenchSpec*> SelectedBenches(const AllOptions& o) {
  std::vector<const BenchSpec*> selected;
  for (const BenchSpec& spec : AllBenches()) {
    const bool wanted =
        o.only.empty() || std::find(o.only.begin(), o.only.end(), spec.name) != o.only.end();
    if (wanted) selected.push_back(&spec);
  }
  return selected;
}

// The JSON `broker` of the run: the private broker every benchmark starts,
// or "external" with --config.
std::string BrokerNameForAll(const AllOptions& o) {
  if (!o.config_path.empty()) return "external";
  return o.mock_broker ? "mock" : testing::InstalledKafkaVersion();
}

int RunAll(const AllOptions& o) {
  Result<std::string> exe = SelfExecutable();
  if (!exe.ok()) {
    Progress("all: " + exe.status().ToString());
    return 1;
  }
  Report report;
  report.started_utc = UtcNowText();
  report.load_at_start = LoadAverage();
  report.cores = std::thread::hardware_concurrency();
  report.command_line = OwnCommandLine();
  const std::string broker = BrokerNameForAll(o);
  report.cluster = o.config_path.empty() ? "a private MariaDB and a private broker (" + broker +
                                               ") started by each benchmark"
                                         : "running cluster of `" + o.config_path + "`";
  Stopwatch clock;
  bool interrupted = false;
  for (const BenchSpec* spec : SelectedBenches(o)) {
    if (StopRequested()) break;
    report.runs.push_back(RunBench(*exe, *spec, o));
    if (report.runs.back().interrupted || StopRequested()) {
      interrupted = true;
      break;
    }
  }
  interrupted = interrupted || StopRequested();
  report.seconds = clock.Seconds();
  report.finished_utc = UtcNowText();
  report.load_at_end = LoadAverage();

  Json failed = Json::array();
  for (const BenchRun& run : report.runs)
    if (!run.failure.empty()) failed.push_back(run.name);
  bool written = false;
  if (interrupted) {
    Progress("all: interrupted; " + o.out + " left as it was");
  } else if (Status st = WriteFileAtomically(o.out, RenderMarkdown(report)); !st.ok()) {
    Progress("all: " + st.ToString());
  } else {
    written = true;
    Progress("all: wrote " + o.out);
  }
  PrintConsoleTable(report);

  Json j;
  j["bench"] = "all";
  j["broker"] = broker;
  j["out"] = written ? Json(o.out) : Json(nullptr);
  j["failed"] = failed;
  j["seconds"] = Round(report.seconds, 1);
  if (interrupted) j["interrupted"] = true;
  PrintJsonLine(j);
  if (interrupted) return 130;
  return failed.empty() && written ? 0 : 1;
}

}  // namespace

void AddAllCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<AllOptions>();
  CLI::App* cmd = app.add_subcommand(
      "all",
      "runs put, http, relay, trigger, index and pipeline (each as a child process) and writes "
      "their "
      "figures next to the same run's baselines as a markdown table to --out");
  cmd->add_option("--config", o->config_path,
                  "cluster config (YAML) of a running cluster, passed to every benchmark; "
                  "default: each starts its own private MariaDB (and broker)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out, "markdown file to write")->capture_default_str();
  cmd->add_option("--only", o->only, "comma-separated subset to run, e.g. put,relay")
      ->delimiter(',')
      ->check(CLI::IsMember(BenchNames()));
  cmd->add_flag(
      "--mock-broker", o->mock_broker,
      "every benchmark starts librdkafka's in-memory mock cluster instead of Apache Kafka");
  cmd->add_flag("--quick", o->quick, "much smaller sizes: a smoke run of ~1 minute per benchmark");
  cmd->callback([o, exit_code] { *exit_code = RunAll(*o); });
}

}  // namespace cellar::bench
