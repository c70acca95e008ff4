// Trigger processes killed mid-stream: SIGKILL cellar-billing
// (examples/billing/cellar_billing_main.cc) and cellar-trigger (YAML webhooks) while
// BASE cells are being written, restart them, and check that every event was
// handled at least once; report the duplicates.
#include <httplib.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

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

  // Kill it while it bills: once it has handled some events and the writer
  // is still ahead of it, right after a scrape of its handled counter.
  double pre = -1;
  const bool busy = WaitFor(
      [&] {
        pre = ScrapeHandled(port1, "billing");
        return pre >= 300 && writer.count() > pre + 20;
      },
      60s, 5ms);
  ASSERT_TRUE(busy) << "billing handled " << pre << " of " << writer.count() << "\n"
                    << first->Log();
  first->Kill();
  const size_t written_at_kill = writer.count();
  std::cout << "[ trigger ] SIGKILL cellar-billing after " << pre << " handled events; "
            << written_at_kill << " BASE cells written so far\n";
  auto at_kill = ReadTriggerLag(c->config, "trips", "billing");
  ASSERT_TRUE(at_kill.ok()) << at_kill.status().ToString();
  int64_t committed_records = 0;
  for (const auto& p : at_kill->partitions)
    if (p.committed > 0 && p.topic == ChangeLogTopic(c->config.kafka, "trips"))
      committed_records += p.committed;

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
  EXPECT_GT(committed_records, 0) << "nothing was committed before the kill";
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
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{CELLAR_TRIGGER_BIN, "--config", c->config_path, "--triggers",
                                 triggers_path},
        logs.File(log));
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

}  // namespace
}  // namespace cellar::trigtest
