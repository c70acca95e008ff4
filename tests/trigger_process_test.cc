// Trigger processes killed mid-stream: SIGKILL cellar-billing
// (examples/billing/cellar_billing_main.cc) and cellar-trigger (YAML webhooks) while
// BASE cells are being written, restart them, and check that every event was
// handled at least once; report the duplicates. Also: SIGTERM during a retry
// backoff exits within the documented bound, --drain-timeout-ms bounds the
// drain, and `cellar trigger pause/resume` reach a running cellar-trigger (issue #17).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "testing/webhook_sink.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"
#include "triggers/webhook.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

// Writes new trip rows (BASE, versions 0..versions-1, each version of a batch
// of rows in one PutBatch) in a background thread until Stop(), one batch
// every `interval` (a steady write rate, like a service's traffic).
class TripWriter {
 public:
  TripWriter(CellStore* store, int rows_per_batch, int versions, std::chrono::milliseconds interval)
      : store_(store), rows_per_batch_(rows_per_batch), versions_(versions), interval_(interval) {
    thread_ = std::thread([this] { Run(); });
  }
  ~TripWriter() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::set<CellAddr> Written() const {
    std::lock_guard<std::mutex> lock(mu_);
    return written_;
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return written_.size();
  }
  uint64_t failures() const { return failures_; }

 private:
  void Run() {
    int64_t n = 0;
    auto next = std::chrono::steady_clock::now();
    while (!stop_) {
      std::this_thread::sleep_until(next);  // pacing, not a wait for a condition
      next += interval_;
      std::vector<Uuid> rows;
      for (int i = 0; i < rows_per_batch_; ++i) rows.push_back(Uuid::Random());
      for (int v = 0; v < versions_; ++v) {
        std::vector<CellWrite> writes;
        for (const Uuid& r : rows)
          writes.push_back(CellWrite{
              r, "BASE", v, {{"state", "requested"}, {"fare", {{"total", 10 + (n++ % 40)}}}}});
        auto res = store_->PutBatch("trips", writes);
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < res.size(); ++i) {
          if (res[i].ok())
            written_.emplace(rows[i].ToString(), "BASE", v);
          else
            ++failures_;
        }
      }
    }
  }

  CellStore* store_;
  const int rows_per_batch_, versions_;
  const std::chrono::milliseconds interval_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> failures_{0};
  mutable std::mutex mu_;
  std::set<CellAddr> written_;
  std::thread thread_;
};

// cellar_trigger_handled_total of `trigger` scraped from a process's /metrics; -1 when unreachable.
double ScrapeHandled(int port, const std::string& trigger) {
  const std::string text = HttpGet(port, "/metrics");
  if (text.empty()) return -1;
  double v = MetricValue(text, "cellar_trigger_handled_total", {{"trigger", trigger}});
  return v < 0 ? 0 : v;
}

// cellar-trigger on cluster `c` running `triggers_path`, logging to `logs`/`log_name`.
std::unique_ptr<ChildProcess> StartTriggerProcess(const Cluster& c,
                                                  const std::string& triggers_path,
                                                  const testing::TempDir& logs,
                                                  const std::string& log_name,
                                                  std::vector<std::string> extra_args = {}) {
  std::vector<std::string> args{CELLAR_TRIGGER_BIN, "--config", c.config_path, "--triggers",
                                triggers_path};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return std::make_unique<ChildProcess>(args, logs.File(log_name));
}

TEST(TriggerProcessTest, SigkillBillingMidStreamThenRestartBillsEveryTripAtLeastOnce) {
  auto c = MakeCluster("tg_kill", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "kill-relay");
  ASSERT_TRUE(relay);
  testing::TempDir logs("trigger-kill");

  const int port1 = FreePort();
  auto first = std::make_unique<ChildProcess>(
      std::vector<std::string>{CELLAR_BILLING_BIN, "--config", c->config_path, "--metrics-address",
                               "127.0.0.1:" + std::to_string(port1)},
      logs.File("billing-1.log"));
  ASSERT_TRUE(first->running());
  TripWriter writer(c->store.get(), 8, 1, 25ms);  // ~320 trips/s

  // Kill it while it bills: once it has handled some events, the broker holds
  // a commit of its group (the restart must have something to resume from;
  // commits come every commit_interval_ms = 200, and the first ~300 events of
  // the backlog take 80-120 ms, so "handled" alone sometimes killed it before
  // its first commit) and the writer is still ahead of it.
  const std::string change_log = ChangeLogTopic(c->config.kafka, "trips");
  // Records of the change log the group committed (the sum of its committed
  // offsets); -1 when Kafka does not answer.
  auto committed_by_group = [&]() -> int64_t {
    auto lag = ReadTriggerLag(c->config, "trips", "billing");
    if (!lag.ok()) return -1;
    int64_t sum = 0;
    for (const auto& p : lag->partitions)
      if (p.committed > 0 && p.topic == change_log) sum += p.committed;
    return sum;
  };
  double pre = -1;
  int64_t committed_records = 0;
  const bool busy = WaitFor(
      [&] {
        pre = ScrapeHandled(port1, "billing");
        if (pre < 300 || writer.count() <= pre) return false;
        committed_records = committed_by_group();
        // Scraped again: the kill follows this scrape, so `pre` stays a lower bound.
        pre = ScrapeHandled(port1, "billing");
        return committed_records > 0 && writer.count() > pre;
      },
      60s, 5ms);
  ASSERT_TRUE(busy) << "billing handled " << pre << " of " << writer.count() << ", committed "
                    << committed_records << "; first process's warnings and errors:\n"
                    << testing::WarningLinesOf(logs.File("billing-1.log"));
  first->Kill();
  const size_t written_at_kill = writer.count();
  std::cout << "[ trigger ] SIGKILL cellar-billing after " << pre << " handled events ("
            << committed_records << " committed); " << written_at_kill
            << " BASE cells written so far\n";
  // What the broker holds after the kill (a commit in flight may have landed).
  committed_records = committed_by_group();

  // Restart: it resumes from the committed offsets while writes go on.
  const int port2 = FreePort();
  ChildProcess second(
      std::vector<std::string>{CELLAR_BILLING_BIN, "--config", c->config_path, "--metrics-address",
                               "127.0.0.1:" + std::to_string(port2)},
      logs.File("billing-2.log"));
  ASSERT_TRUE(second.running());
  ASSERT_TRUE(WaitFor([&] { return ScrapeHandled(port2, "billing") >= 300; }, 60s, 50ms))
      << second.Log();
  writer.Stop();
  EXPECT_EQ(writer.failures(), 0u);
  const std::set<CellAddr> base = writer.Written();
  ASSERT_GT(base.size(), written_at_kill);

  // Every BASE ends up with its STATUS (only billing writes STATUS).
  std::set<CellAddr> unbilled = base;
  const bool all_billed = WaitFor(
      [&] {
        for (auto it = unbilled.begin(); it != unbilled.end();) {
          auto st =
              c->store->Get("trips", *Uuid::Parse(std::get<0>(*it)), "STATUS", std::get<2>(*it));
          it = st.ok() ? unbilled.erase(it) : std::next(it);
        }
        return unbilled.empty();
      },
      90s, 200ms);
  EXPECT_TRUE(all_billed) << "never billed: " << DescribeSome(unbilled) << "\n" << second.Log();
  // Once the group's lag is 0 its handled counter is final.
  int64_t lag = -1;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto l = ReadTriggerLag(c->config, "trips", "billing");
        lag = l.ok() ? l->total_lag : -1;
        return lag == 0;
      },
      60s, 200ms))
      << "billing lag " << lag;
  const double post = ScrapeHandled(port2, "billing");
  ASSERT_GE(post, 0) << second.Log();
  // The restart resumed from committed offsets rather than from the beginning.
  EXPECT_LT(post, static_cast<double>(base.size()));
  EXPECT_GT(committed_records, 0) << "the commit seen before the kill is gone";
  // handled before the kill >= pre (scraped just before SIGKILL), so:
  const double duplicates_at_least = pre + post - static_cast<double>(base.size());
  EXPECT_GE(pre + post, static_cast<double>(base.size()) - 0.5)
      << "fewer handler successes than BASE cells";
  std::cout << "[ trigger ] cellar-billing: " << base.size() << " BASE cells, handled " << pre
            << " (>=, before SIGKILL) + " << post
            << " (after restart); duplicates >= " << duplicates_at_least << "\n";
  RecordProperty("base_cells", std::to_string(base.size()));
  RecordProperty("duplicates_at_least", std::to_string(static_cast<int64_t>(duplicates_at_least)));
  EXPECT_EQ(second.Terminate(30s), 0) << "SIGTERM must drain and exit 0\n" << second.Log();
  relay->Stop();
}

// `cellar-billing --replay billing --from beginning` (the remedy a group's
// lost records call for) bills every BASE cell from the cell tables, without
// Kafka consumption, and exits 0; run again, it writes nothing new (its puts
// are identical). Found by the history check under ASan: the replay logged
// "replay done" and did not exit (KeyedExecutor::Shutdown left idle threads
// asleep when it ran before the last task's count dropped; about every other
// run here hung before the fix).
TEST(TriggerProcessTest, ReplayFromTheBeginningBillsEveryTripAndExits) {
  auto c = MakeCluster("tg_replay", Broker());
  ASSERT_TRUE(c);
  std::vector<CellWrite> writes;
  for (int i = 0; i < 200; ++i)
    writes.push_back(CellWrite{Uuid::Random(), "BASE", i % 3, {{"fare", {{"total", i % 7}}}}});
  for (const auto& r : c->store->PutBatch("trips", writes))
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  testing::TempDir logs("trigger-replay");
  const std::vector<std::string> replay = {
      CELLAR_BILLING_BIN, "--config", c->config_path, "--replay", "billing", "--from", "beginning"};
  for (int round = 1; round <= 2; ++round) {
    const testing::RunResult r =
        testing::RunToExit(replay, logs.File("replay-" + std::to_string(round) + ".log"), 60s);
    ASSERT_EQ(r.exit_code, 0) << "round " << round << ":\n" << r.log;
    for (const CellWrite& w : writes) {
      auto st = c->store->Versions("trips", w.row_key, "STATUS", VersionQuery{});
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      ASSERT_EQ(st->size(), 1u) << "round " << round << ": " << w.row_key.ToString();
      const double total = w.body["fare"]["total"].get<double>();
      EXPECT_EQ(st->front().ref_key, w.ref_key);
      EXPECT_EQ(st->front().body.value("state", ""), total > 0 ? "billed" : "free");
    }
  }
}

// The same crash with the YAML webhook process (cellar-trigger): the test's
// HTTP server sees every delivery, so duplicates are counted exactly and the
// per-row order of first deliveries is checked across the crash.
TEST(TriggerProcessTest, SigkillWebhookTriggerMidStreamCountsDuplicatesExactly) {
  auto c = MakeCluster("tg_killhook", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "killhook-relay");
  ASSERT_TRUE(relay);
  testing::TempDir logs("trigger-killhook");

  std::mutex mu;
  std::map<CellAddr, int> calls;
  std::vector<CellAddr> sequence;  // in arrival order
  httplib::Server server;
  server.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    auto ev = DecodeCellEvent(req.body);
    if (!ev.ok()) {
      res.status = 422;
      return;
    }
    thread_local std::mt19937 rng(std::random_device{}());
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));  // the service's work
    std::lock_guard<std::mutex> lock(mu);
    ++calls[AddrOf(ev->cell)];
    sequence.push_back(AddrOf(ev->cell));
    res.status = 200;
  });
  const int hook_port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(hook_port, 0);
  std::thread server_thread([&] { server.listen_after_bind(); });
  struct StopServer {
    httplib::Server& s;
    std::thread& t;
    ~StopServer() {
      s.stop();
      if (t.joinable()) t.join();
    }
  } stop_server{server, server_thread};

  const std::string triggers_path = testing::WriteTempFile(
      "triggers:\n"
      "  - name: hook\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    webhook: { url: \"http://127.0.0.1:" +
          std::to_string(hook_port) +
          "/hook\", timeout_ms: 5000 }\n"
          "    retry: { max_attempts: 10, initial_backoff_ms: 20, max_backoff_ms: 200 }\n",
      ".yaml");
  auto delivered = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return calls.size();
  };
  auto start = [&](const std::string& log) {
    return StartTriggerProcess(*c, triggers_path, logs, log);
  };

  TripWriter writer(c->store.get(), 6, 2, 30ms);  // ~400 cells/s
  auto first = start("trigger-1.log");
  ASSERT_TRUE(first->running());
  size_t at_kill = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        at_kill = delivered();
        return at_kill >= 300 && writer.count() > at_kill + 20;
      },
      60s, 5ms))
      << "delivered " << delivered() << "\n"
      << first->Log();
  first->Kill();
  std::cout << "[ trigger ] SIGKILL cellar-trigger after " << at_kill << " delivered events\n";
  auto second = start("trigger-2.log");
  ASSERT_TRUE(second->running());
  ASSERT_TRUE(WaitFor([&] { return delivered() >= at_kill + 300; }, 60s, 50ms)) << second->Log();
  writer.Stop();
  EXPECT_EQ(writer.failures(), 0u);
  const std::set<CellAddr> base = writer.Written();

  std::set<CellAddr> missing;
  const bool all = WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        missing.clear();
        for (const auto& a : base)
          if (!calls.count(a)) missing.insert(a);
        return missing.empty();
      },
      90s, 100ms);
  EXPECT_TRUE(all) << "never delivered: " << DescribeSome(missing) << "\n" << second->Log();
  EXPECT_TRUE(WaitFor(
      [&] {
        auto l = ReadTriggerLag(c->config, "trips", "hook");
        return l.ok() && l->total_lag == 0;
      },
      60s, 200ms));
  EXPECT_EQ(second->Terminate(30s), 0) << second->Log();

  std::lock_guard<std::mutex> lock(mu);
  size_t total = 0, duplicated_events = 0;
  for (const auto& [a, n] : calls) {
    total += static_cast<size_t>(n);
    if (n > 1) ++duplicated_events;
  }
  // Per row, first deliveries come in ref_key order, across the crash too.
  std::map<std::string, int64_t> max_ref;
  std::set<CellAddr> seen;
  std::vector<std::string> violations;
  for (const CellAddr& a : sequence) {
    if (!seen.insert(a).second) continue;  // a re-delivery
    auto [it, fresh] = max_ref.try_emplace(std::get<0>(a), std::get<2>(a));
    if (!fresh) {
      if (std::get<2>(a) <= it->second) violations.push_back(Describe(a));
      it->second = std::max(it->second, std::get<2>(a));
    }
  }
  EXPECT_THAT(violations, IsEmpty()) << "first deliveries out of ref_key order";
  EXPECT_EQ(calls.size(), base.size()) << "deliveries of cells the writer never wrote";
  std::cout << "[ trigger ] cellar-trigger: " << base.size() << " BASE cells, " << total
            << " deliveries: " << total - calls.size() << " duplicates over " << duplicated_events
            << " events\n";
  RecordProperty("webhook_events", std::to_string(base.size()));
  RecordProperty("webhook_duplicates", std::to_string(total - calls.size()));
  relay->Stop();
}

// Deliveries to a WebhookSink, by event (row/column/ref_key) and HTTP answer.
class SinkLog {
 public:
  void Add(const std::string& body, int answer) {
    auto ev = DecodeCellEvent(body);
    std::lock_guard<std::mutex> lock(mu_);
    if (ev.ok()) (answer == 200 ? ok_ : failed_)[AddrOf(ev->cell)]++;
  }
  int ok(const CellAddr& a) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ok_.find(a);
    return it == ok_.end() ? 0 : it->second;
  }
  int failed(const CellAddr& a) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = failed_.find(a);
    return it == failed_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<CellAddr, int> ok_, failed_;
};

std::string WebhookYaml(const std::string& name, const std::string& url, const std::string& extra) {
  return "triggers:\n  - name: " + name +
         "\n    datastore: trips\n    column: BASE\n    webhook: { url: \"" + url +
         "\", timeout_ms: 2000 }\n" + extra;
}

// SIGTERM while the only event waits for its next attempt (a webhook answering
// 503, a retry policy of minutes): cellar-trigger exits 0 within the bound of
// trigger_worker.h (the attempt in flight, at most timeout_ms = 2 s, + about
// 1 s), not after the retries; the event was not committed, so the restarted
// process delivers it again.
TEST(TriggerProcessTest, SigtermDuringARetryBackoffExitsWithinTheBoundAndTheEventComesBack) {
  auto c = MakeCluster("tg_termbound", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "termbound-relay");
  ASSERT_TRUE(relay);
  testing::TempDir logs("trigger-termbound");
  std::atomic<bool> down{true};
  SinkLog log;
  auto sink = testing::WebhookSink::Start([&](const std::string&, const std::string& body) {
    const int answer = down ? 503 : 200;
    log.Add(body, answer);
    return answer;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  const std::string triggers_path = testing::WriteTempFile(
      WebhookYaml("stubborn", (*sink)->Url("/hook"),
                  "    retry: { max_attempts: 100, initial_backoff_ms: 4000, "
                  "max_backoff_ms: 60000 }\n"),
      ".yaml");
  auto start = [&](const std::string& name) {
    return StartTriggerProcess(*c, triggers_path, logs, name);
  };
  auto first = start("trigger-1.log");
  ASSERT_TRUE(first->running());
  const Uuid row = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, row, "BASE", 0, {{"fare", 3}}));
  const CellAddr addr{row.ToString(), "BASE", 0};
  // Two failed attempts: it now waits 0..8 s for the third.
  ASSERT_TRUE(WaitFor([&] { return log.failed(addr) >= 2; }, 60s)) << first->Log();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(first->Terminate(30s), 0) << first->Log();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(ms, 2000 + 2000) << "SIGTERM waited for the retry policy\n" << first->Log();
  std::cout << "[ trigger ] SIGTERM during a retry backoff: exit after " << ms << " ms\n";
  auto lag = ReadTriggerLag(c->config, "trips", "stubborn");
  ASSERT_TRUE(lag.ok()) << lag.status().ToString();
  EXPECT_GE(lag->total_lag, 1) << "the failing event was committed";

  down = false;
  auto second = start("trigger-2.log");
  ASSERT_TRUE(second->running());
  EXPECT_TRUE(WaitFor([&] { return log.ok(addr) >= 1; }, 60s))
      << "the event was not delivered again after the restart\n"
      << second->Log();
  EXPECT_EQ(second->Terminate(30s), 0) << second->Log();
  relay->Stop();
}

// `cellar-trigger --drain-timeout-ms` bounds a SIGTERM's drain (trigger_worker.h):
// a slow row has many events queued before its partition's last, already
// handled, event; with a 500 ms drain the process exits without starting
// them all (the 30 s default would run every one, >= 4.5 s), and the next
// process delivers those not handled.
TEST(TriggerProcessTest, DrainTimeoutFlagBoundsTheDrainAtSigterm) {
  auto c = MakeCluster("tg_drainflag", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "drainflag-relay");
  ASSERT_TRUE(relay);
  testing::TempDir logs("trigger-drainflag");
  const auto [slow_row, fast_row] = TwoRowsOfOneShard(c->config.shards);
  constexpr int kSlowEvents = 20;
  SinkLog log;
  auto sink = testing::WebhookSink::Start([&](const std::string&, const std::string& body) {
    auto ev = DecodeCellEvent(body);
    if (ev.ok() && ev->cell.row_key == slow_row)
      std::this_thread::sleep_for(300ms);  // the receiver's work
    log.Add(body, 200);
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  const std::string triggers_path =
      testing::WriteTempFile(WebhookYaml("drainflag", (*sink)->Url("/hook"), ""), ".yaml");
  auto first =
      StartTriggerProcess(*c, triggers_path, logs, "trigger-1.log", {"--drain-timeout-ms", "500"});
  ASSERT_TRUE(first->running());
  std::vector<CellAddr> slow;
  for (int i = 0; i < kSlowEvents; ++i) {
    ASSERT_TRUE(PutCell(*c->store, slow_row, "BASE", i, {{"i", i}}));
    slow.emplace_back(slow_row.ToString(), "BASE", i);
  }
  ASSERT_TRUE(PutCell(*c->store, fast_row, "BASE", 0, {{"i", 0}}));
  const CellAddr fast{fast_row.ToString(), "BASE", 0};
  ASSERT_TRUE(WaitFor([&] { return log.ok(fast) >= 1; }, 60s)) << first->Log();
  auto handled = [&] {
    return std::count_if(slow.begin(), slow.end(),
                         [&](const CellAddr& a) { return log.ok(a) > 0; });
  };
  ASSERT_LT(handled() + 5, kSlowEvents) << "too few slow events left to drain";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(first->Terminate(30s), 0) << first->Log();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  const auto handled_at_exit = handled();
  EXPECT_LT(ms, 3000) << "SIGTERM drained past --drain-timeout-ms\n" << first->Log();
  EXPECT_LT(handled_at_exit, kSlowEvents) << "every queued event ran within the drain";
  std::cout << "[ trigger ] SIGTERM with --drain-timeout-ms 500: exit after " << ms << " ms, "
            << kSlowEvents - handled_at_exit << " slow events left to the next process\n";

  auto second = StartTriggerProcess(*c, triggers_path, logs, "trigger-2.log");
  ASSERT_TRUE(second->running());
  EXPECT_TRUE(WaitFor([&] { return handled() == kSlowEvents; }, 60s))
      << "events left by the drain were not delivered again\n"
      << second->Log();
  EXPECT_EQ(second->Terminate(30s), 0) << second->Log();
  relay->Stop();
}

// `cellar` run as a child: its exit code and the JSON line it printed (null
// when none).
std::pair<int, nlohmann::json> RunCli(const testing::TempDir& logs, const std::string& name,
                                      std::vector<std::string> args) {
  args.insert(args.begin(), CELLAR_CLI_BIN);
  const testing::RunResult cli = testing::RunToExit(args, logs.File(name), 60s);
  if (cli.exit_code == testing::kRunTimedOut) return {cli.exit_code, nullptr};
  return {cli.exit_code, cli.report};
}

// `cellar trigger pause` reaches a running cellar-trigger without a restart
// (its cellar_trigger_paused gauge turns 1 and a write is not delivered),
// `cellar trigger status` shows it paused with the reason, and
// `cellar trigger resume` continues it: the write made during the pause is
// delivered.
TEST(TriggerProcessTest, CliPauseAndResumeReachARunningTriggerProcess) {
  auto c = MakeCluster("tg_clipause", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "clipause-relay");
  ASSERT_TRUE(relay);
  testing::TempDir logs("trigger-clipause");
  SinkLog log;
  auto sink = testing::WebhookSink::Start([&](const std::string&, const std::string& body) {
    log.Add(body, 200);
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  const std::string triggers_path =
      testing::WriteTempFile(WebhookYaml("held", (*sink)->Url("/hook"), ""), ".yaml");
  const int port = FreePort();
  auto trigger = StartTriggerProcess(*c, triggers_path, logs, "trigger.log",
                                     {"--metrics-address", "127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(trigger->running());
  auto paused = [&] {
    return MetricValue(HttpGet(port, "/metrics"), "cellar_trigger_paused", {{"trigger", "held"}});
  };
  const Uuid first = Uuid::Random(), second = Uuid::Random();
  ASSERT_TRUE(PutCell(*c->store, first, "BASE", 0, {{"fare", 1}}));
  ASSERT_TRUE(WaitFor(
      [&] {
        return log.ok({first.ToString(), "BASE", 0}) >= 1;
      },
      60s))
      << trigger->Log();
  EXPECT_EQ(paused(), 0);

  auto [code, out] = RunCli(logs, "pause.log",
                            {"--config", c->config_path, "trigger", "pause", "held", "--reason",
                             "deploying the billing service"});
  EXPECT_EQ(code, 0) << out.dump();
  EXPECT_EQ(out.value("paused", false), true) << out.dump();
  ASSERT_TRUE(WaitFor([&] { return paused() == 1; }, 10s)) << trigger->Log();

  ASSERT_TRUE(PutCell(*c->store, second, "BASE", 0, {{"fare", 2}}));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = ReadTriggerLag(c->config, "trips", "held");
        return l.ok() && l->total_lag >= 1;
      },
      30s, 200ms));
  EXPECT_EQ(log.ok({second.ToString(), "BASE", 0}), 0) << "a paused trigger delivered";
  std::tie(code, out) = RunCli(
      logs, "status.log", {"--config", c->config_path, "trigger", "status", "held", "-d", "trips"});
  EXPECT_EQ(code, 0) << out.dump();
  EXPECT_EQ(out.value("paused", false), true) << out.dump();
  EXPECT_EQ(out.value("pause_reason", ""), "deploying the billing service") << out.dump();
  EXPECT_GE(out.value("total_lag", int64_t{0}), 1) << out.dump();

  std::tie(code, out) =
      RunCli(logs, "resume.log", {"--config", c->config_path, "trigger", "resume", "held"});
  EXPECT_EQ(code, 0) << out.dump();
  EXPECT_EQ(out.value("paused", true), false) << out.dump();
  EXPECT_TRUE(WaitFor(
      [&] {
        return log.ok({second.ToString(), "BASE", 0}) >= 1;
      },
      30s))
      << trigger->Log();
  EXPECT_EQ(paused(), 0);
  std::tie(code, out) =
      RunCli(logs, "status2.log",
             {"--config", c->config_path, "trigger", "status", "held", "-d", "trips"});
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out.value("paused", true), false) << out.dump();
  EXPECT_EQ(trigger->Terminate(30s), 0) << trigger->Log();
  relay->Stop();
}

// cellar-webhook-sink (the local stack's receiver) records one line per
// event whether a POST carries one event or a batch (triggers/webhook.h), and
// refuses a batch that is not a JSON array without recording anything.
TEST(WebhookSinkProcessTest, RecordsOneLinePerEventForSingleAndBatchPosts) {
  testing::TempDir dir("webhook-sink");
  ChildProcess sink({CELLAR_WEBHOOK_SINK_BIN, "--out", dir.File("events.jsonl"), "--ready-file",
                     dir.File("ready")},
                    dir.File("sink.log"));
  ASSERT_TRUE(sink.running());
  std::string address;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(dir.File("ready"));
        return static_cast<bool>(std::getline(in, address)) && !address.empty();
      },
      10s))
      << sink.Log();
  httplib::Client client("http://" + address);
  CellEvent a, b, t;
  for (CellEvent* e : {&a, &b, &t}) {
    e->datastore = "trips";
    e->cell.row_key = Uuid::Random();
    e->cell.column = "BASE";
    e->cell.body = {{"fare", 3}};
  }
  b.cell.ref_key = 1;
  t.cell.tombstone = true;
  t.cell.body = nullptr;
  KafkaConfig kafka;
  auto single =
      client.Post("/hook", EncodeCellEvent("trips", a.cell, INT64_MAX), "application/json");
  ASSERT_TRUE(single);
  EXPECT_EQ(single->status, 200);
  auto batch =
      client.Post("/hook", EncodeWebhookBatch(kafka, {&b, &t}), kCloudEventsBatchContentType);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->status, 200);
  auto bad = client.Post("/hook", R"({"not":"an array"})", kCloudEventsBatchContentType);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  auto count = client.Get("/count");
  ASSERT_TRUE(count);
  EXPECT_EQ(count->body, "3\n");
  EXPECT_EQ(sink.Terminate(10s), 0) << sink.Log();

  std::ifstream in(dir.File("events.jsonl"));
  std::vector<CellEvent> lines;
  for (std::string line; std::getline(in, line);) {
    auto e = DecodeCellEvent(line);
    ASSERT_TRUE(e.ok()) << line << ": " << e.status().ToString();
    lines.push_back(*e);
  }
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].cell.row_key, a.cell.row_key);
  EXPECT_EQ(lines[1].cell.row_key, b.cell.row_key);
  EXPECT_EQ(lines[1].cell.ref_key, 1);
  EXPECT_EQ(lines[2].cell.row_key, t.cell.row_key);
  EXPECT_TRUE(lines[2].cell.tombstone);
}

}  // namespace
}  // namespace cellar::trigtest
