// Batched webhook triggers (triggers/webhook.h; YAML `webhook: { batch_size,
// batch_window_ms }`) run by an in-process TriggerWorker against a
// testing::WebhookSink: a POST carries up to batch_size events in CloudEvents'
// batched content mode (a JSON array of structured events), each row's events
// in change-log order; a failing POST is retried whole (same events, same
// order) and then every event of it is set aside as its own dead letter.
// batch_size 1 (the default) keeps one event per POST in binary mode, which
// webhook_test.cc covers (body, Content-Type application/json, ce-* headers).
#include <algorithm>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/webhook_sink.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"
#include "triggers/webhook.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A WebhookSink that records every request (in the order its handler ran)
// and answers each with `status`.
class RecordingSink {
 public:
  explicit RecordingSink(int status) {
    auto s = testing::WebhookSink::StartWithHeaders(
        [this, status](const testing::WebhookSink::Request& r) {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(r);
          return status;
        });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) sink_ = std::move(s).value();
  }
  bool ok() const { return sink_ != nullptr; }
  std::string Url(const std::string& path) const { return sink_->Url(path); }
  std::vector<testing::WebhookSink::Request> Requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // The distinct cell versions delivered so far (elements' "data").
  std::set<CellAddr> Delivered() const {
    std::set<CellAddr> out;
    for (const auto& r : Requests()) {
      auto j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
      if (!j.is_array()) continue;
      for (const auto& el : j) {
        if (!el.is_object() || !el.contains("data")) continue;
        auto ev = DecodeCellEvent(el["data"].dump());
        if (ev.ok()) out.insert(AddrOf(ev->cell));
      }
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<testing::WebhookSink::Request> requests_;
  std::unique_ptr<testing::WebhookSink> sink_;
};

std::string Header(const testing::WebhookSink::Request& r, const std::string& lower_name) {
  auto it = r.headers.find(lower_name);
  return it == r.headers.end() ? "<none>" : it->second;
}

// Waits until the relay put `n` records on the change log, so that they wait
// there as a backlog when the worker starts.
bool RelayAcknowledged(Relay& relay, uint64_t n) {
  return WaitFor([&] { return relay.stats().acknowledged >= n; }, 30s);
}

TEST(WebhookBatchTest, EventsArriveInBatchesAsCloudEventsInRowOrder) {
  auto c = MakeCluster("tg_hookbatch", Broker());
  ASSERT_TRUE(c);
  RecordingSink sink(200);
  ASSERT_TRUE(sink.ok());
  const std::string yaml =
      "triggers:\n"
      "  - name: hook_batch\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    webhook: { url: \"" +
      sink.Url("/batch") + "\", batch_size: 50, batch_window_ms: 200 }\n";
  auto defs = ParseTriggerDefinitions(yaml, "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 1u);
  EXPECT_EQ((*defs)[0].batch_size, 50);
  EXPECT_EQ((*defs)[0].batch_window_ms, 200);

  auto relay = StartRelay(c->store.get(), "hookbatch-relay");
  ASSERT_TRUE(relay);
  constexpr int kVersions = 3;
  const std::vector<Uuid> rows = NewRows(40);
  std::set<CellAddr> want;
  for (int v = 0; v < kVersions; ++v) {
    auto a = PutVersion(*c->store, rows, "BASE", v, [v](size_t i) {
      return nlohmann::json{{"i", i}, {"v", v}};
    });
    want.insert(a.begin(), a.end());
  }
  ASSERT_EQ(want.size(), rows.size() * kVersions);
  ASSERT_TRUE(RelayAcknowledged(*relay, want.size()))
      << "relay acknowledged " << relay->stats().acknowledged;

  TriggerWorker w(c->config, Opts("hookbatch"));
  ASSERT_EQ("OK", w.on_webhook((*defs)[0]).ToString());
  ASSERT_TRUE(w.Start().ok());
  std::set<CellAddr> missing;
  const bool all = WaitFor(
      [&] {
        const std::set<CellAddr> got = sink.Delivered();
        missing.clear();
        std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                            std::inserter(missing, missing.end()));
        return missing.empty();
      },
      60s);
  w.Stop();
  relay->Stop();
  ASSERT_TRUE(all) << "never delivered: " << DescribeSome(missing);

  const std::string source = "cellar://" + c->config.kafka.topic_prefix + "/trips";
  const std::set<std::string> members = {"specversion", "id",      "source",          "type",
                                         "time",        "subject", "datacontenttype", "data"};
  const auto requests = sink.Requests();
  size_t largest = 0, events = 0;
  std::map<std::string, CellAddr> addr_of_id;
  std::map<CellAddr, std::set<std::string>> ids_of_addr;
  std::map<std::string, std::vector<int64_t>> first_refs;  // by row, first deliveries in order
  std::set<CellAddr> seen;
  for (const auto& r : requests) {
    EXPECT_EQ(r.path, "/batch");
    EXPECT_EQ(Header(r, "content-type"), kCloudEventsBatchContentType);
    EXPECT_EQ(Header(r, "x-cellar-trigger"), "hook_batch");
    auto batch = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(batch.is_array()) << r.body.substr(0, 300);
    EXPECT_GE(batch.size(), 1u);
    EXPECT_LE(batch.size(), 50u);
    EXPECT_EQ(Header(r, "x-cellar-batch-size"), std::to_string(batch.size()));
    largest = std::max(largest, batch.size());
    events += batch.size();
    for (const auto& el : batch) {
      ASSERT_TRUE(el.is_object()) << el.dump();
      std::set<std::string> keys;
      for (const auto& [k, v] : el.items()) keys.insert(k);
      EXPECT_EQ(keys, members) << el.dump();
      ASSERT_TRUE(el.contains("data")) << el.dump();
      auto ev = DecodeCellEvent(el["data"].dump());
      ASSERT_TRUE(ev.ok()) << ev.status().ToString() << ": " << el.dump();
      const Cell& cell = ev->cell;
      const CellAddr a = AddrOf(cell);
      const std::string id = el.value("id", "");
      EXPECT_EQ(el.value("specversion", ""), "1.0");
      EXPECT_EQ(id, "trips:" + std::to_string(cell.shard) + ":" + std::to_string(cell.added_id));
      EXPECT_EQ(el.value("source", ""), source);
      EXPECT_EQ(el.value("type", ""), "cellar.cell.written");
      EXPECT_EQ(el.value("time", ""), el["data"].value("created_at", "?"));
      EXPECT_EQ(el.value("subject", ""),
                cell.row_key.ToString() + "/" + cell.column + "/" + std::to_string(cell.ref_key));
      EXPECT_EQ(el.value("datacontenttype", ""), "application/json");
      EXPECT_EQ(ev->datastore, "trips");
      EXPECT_FALSE(cell.tombstone);
      EXPECT_EQ(cell.body.value("v", -1), cell.ref_key) << Describe(a);
      EXPECT_TRUE(want.count(a)) << "not written by the test: " << Describe(a);
      auto [it, inserted] = addr_of_id.emplace(id, a);
      EXPECT_TRUE(inserted || it->second == a)
          << "id " << id << " names " << Describe(it->second) << " and " << Describe(a);
      ids_of_addr[a].insert(id);
      // Delivery is at least once: a repeat of an event already seen is allowed.
      if (seen.insert(a).second) first_refs[cell.row_key.ToString()].push_back(cell.ref_key);
    }
  }
  EXPECT_EQ(seen, want);
  EXPECT_EQ(addr_of_id.size(), want.size()) << "one id per cell version";
  for (const auto& [a, ids] : ids_of_addr) EXPECT_EQ(ids.size(), 1u) << Describe(a);
  EXPECT_GT(largest, 1u) << "a backlog of " << want.size()
                         << " events with a 200 ms window never made a batch";
  ASSERT_EQ(first_refs.size(), rows.size());
  for (const auto& [row, refs] : first_refs)
    EXPECT_EQ(refs, (std::vector<int64_t>{0, 1, 2})) << "row " << row << " out of log order";
  std::cout << "[ webhook batch ] " << events << " events (" << want.size() << " distinct) in "
            << requests.size() << " POSTs, largest " << largest << "\n";
}

TEST(WebhookBatchTest, AFailingBatchIsRetriedWholeThenEveryEventIsSetAside) {
  auto c = MakeCluster("tg_hookbatchfail", Broker());
  ASSERT_TRUE(c);
  RecordingSink sink(503);
  ASSERT_TRUE(sink.ok());
  const std::string yaml =
      "triggers:\n"
      "  - name: hook_batch_fail\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    webhook: { url: \"" +
      sink.Url("/down") +
      "\", batch_size: 20, batch_window_ms: 200 }\n"
      "    retry: { max_attempts: 3, initial_backoff_ms: 10, max_backoff_ms: 50 }\n"
      "    dead_letter: { pause_after: 1000, window: 10m }\n";
  auto defs = ParseTriggerDefinitions(yaml, "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 1u);

  auto relay = StartRelay(c->store.get(), "hookbatchfail-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(30);
  const std::set<CellAddr> want = PutVersion(*c->store, rows, "BASE", 0, [](size_t i) {
    return nlohmann::json{{"i", i}};
  });
  ASSERT_EQ(want.size(), rows.size());
  ASSERT_TRUE(RelayAcknowledged(*relay, want.size()))
      << "relay acknowledged " << relay->stats().acknowledged;

  TriggerWorker w(c->config, Opts("hookbatchfail"));
  ASSERT_EQ("OK", w.on_webhook((*defs)[0]).ToString());
  ASSERT_TRUE(w.Start().ok());
  const bool settled =
      WaitFor([&] { return Totals(w, "hook_batch_fail").set_aside >= want.size(); }, 60s);
  const TriggerTotals t = Totals(w, "hook_batch_fail");
  w.Stop();
  relay->Stop();
  ASSERT_TRUE(settled) << "set aside " << t.set_aside << " of " << want.size();
  EXPECT_EQ(t.set_aside, want.size());
  EXPECT_EQ(t.handled, 0u);
  EXPECT_EQ(t.retried, want.size() * 2) << "each event counts each retry of its batch";
  EXPECT_FALSE(t.paused);

  // Every batch (its events' ids, in order) was posted exactly max_attempts
  // times, and no event was in two different batches.
  std::map<std::vector<std::string>, int> posts;
  for (const auto& r : sink.Requests()) {
    auto batch = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(batch.is_array()) << r.body.substr(0, 300);
    EXPECT_EQ(Header(r, "x-cellar-batch-size"), std::to_string(batch.size()));
    std::vector<std::string> ids;
    for (const auto& el : batch) ids.push_back(el.is_object() ? el.value("id", "") : "");
    ++posts[ids];
  }
  std::map<std::string, int> batches_of_id;
  size_t largest = 0;
  for (const auto& [ids, n] : posts) {
    EXPECT_EQ(n, 3) << "batch of " << ids.size() << " starting " << ids.front();
    largest = std::max(largest, ids.size());
    for (const std::string& id : ids) ++batches_of_id[id];
  }
  EXPECT_EQ(batches_of_id.size(), want.size());
  for (const auto& [id, n] : batches_of_id) EXPECT_EQ(n, 1) << id << " is in " << n << " batches";

  // Each event is its own dead letter, after the batch's 3 attempts.
  auto dead = ListDeadLetters(c->config, "trips", "hook_batch_fail");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  std::map<CellAddr, int> dead_count;
  for (const DeadLetter& d : *dead) {
    auto ev = DecodeCellEvent(d.event_json);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    const CellAddr a = AddrOf(ev->cell);
    ++dead_count[a];
    EXPECT_EQ(d.trigger, "hook_batch_fail");
    EXPECT_EQ(d.attempts, 3) << Describe(a);
    EXPECT_THAT(d.error, HasSubstr("answered 503")) << Describe(a);
    EXPECT_TRUE(want.count(a)) << "not written by the test: " << Describe(a);
    const std::string id =
        "trips:" + std::to_string(ev->cell.shard) + ":" + std::to_string(ev->cell.added_id);
    EXPECT_EQ(batches_of_id.count(id), 1u) << "set aside but never posted: " << id;
  }
  EXPECT_EQ(dead->size(), want.size());
  EXPECT_EQ(dead_count.size(), want.size());
  for (const auto& [a, n] : dead_count) EXPECT_EQ(n, 1) << Describe(a);
  std::cout << "[ webhook batch ] failing: " << posts.size() << " batches (largest " << largest
            << ") posted 3 times each, " << dead->size() << " dead letters\n";
}

}  // namespace
}  // namespace cellar::trigtest
