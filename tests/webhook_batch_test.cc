// Batched webhook triggers (triggers/webhook.h; YAML `webhook: { batch_size,
// batch_window_ms }`) run by an in-process TriggerWorker against a
// testing::WebhookSink: a POST carries up to batch_size events in CloudEvents'
// batched content mode (a JSON array of structured events), each row's events
// in change-log order; a failing POST is retried whole (same events, same
// order) and then every event of it is set aside as its own dead letter. A
// 2xx answer {"batchItemFailures": [{"itemIdentifier": <ce id>}, ...]} fails
// those events only: they are retried with their rows' later events of the
// POST, the rest are done; naming an event not in the POST fails it whole.
// batch_size 1 (the default) keeps one event per POST in binary mode, which
// webhook_test.cc covers (body, Content-Type application/json, ce-* headers).
#include <httplib.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
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

// One element of a batch POST: its CloudEvents id and its cell.
struct Posted {
  std::string id;
  Cell cell;
};

// A local receiver (httplib, as webhook_test.cc's WebhookServer: 64 threads,
// listen backlog raised) of batch POSTs at /batch that answers 200 with the
// body `answer` returns. WebhookSink cannot set the answer's body. `answer`
// runs under the sink's lock, in the order the POSTs are recorded.
class AnsweringSink {
 public:
  using Answer = std::function<std::string(const std::vector<Posted>& batch)>;
  explicit AnsweringSink(Answer answer) : answer_(std::move(answer)) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.Post("/batch", [this](const httplib::Request& req, httplib::Response& res) {
      std::vector<Posted> batch;
      auto j = nlohmann::json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      EXPECT_TRUE(j.is_array()) << req.body.substr(0, 300);
      for (const auto& el : j.is_array() ? j : nlohmann::json::array()) {
        auto ev = DecodeCellEvent(el.is_object() ? el.value("data", nlohmann::json()).dump() : "");
        EXPECT_TRUE(ev.ok()) << ev.status().ToString() << ": " << el.dump().substr(0, 300);
        if (ev.ok()) batch.push_back({el.value("id", ""), ev->cell});
      }
      std::lock_guard<std::mutex> lock(mu_);
      posts_.push_back(batch);
      res.status = 200;
      res.set_content(answer_(batch), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    testing::RaiseListenBacklog(port_);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    EXPECT_TRUE(WaitFor([&] { return server_.is_running(); }, 5s));
  }
  ~AnsweringSink() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/batch"; }
  std::vector<std::vector<Posted>> Posts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return posts_;
  }

 private:
  const Answer answer_;
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::vector<Posted>> posts_;
};

// Answers that name no failed event: every event of the POST is done.
const std::vector<std::string> kSuccessAnswers = {"ok", "", "{}", R"({"batchItemFailures": []})",
                                                  R"({"batchItemFailures": null})"};

std::string CeId(const Cell& c) {
  return "trips:" + std::to_string(c.shard) + ":" + std::to_string(c.added_id);
}

// A batched webhook trigger `name` on trips/BASE posting to `url`: 3
// attempts 10-50 ms apart, and a dead-letter policy that does not pause.
std::string RetryingBatchYaml(const std::string& name, const std::string& url, int batch_size) {
  return "triggers:\n  - name: " + name + "\n    datastore: trips\n    column: BASE\n" +
         "    webhook: { url: \"" + url + "\", batch_size: " + std::to_string(batch_size) +
         ", batch_window_ms: 200 }\n" +
         "    retry: { max_attempts: 3, initial_backoff_ms: 10, max_backoff_ms: 50 }\n" +
         "    dead_letter: { pause_after: 1000, window: 10m }\n";
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

// Each element's "data" is the change-log record as the relay published it
// (the webhook's consumer forwards that text and never parses the body),
// except for a body too large for the log: that one is read from the store
// and sent whole, without "body_omitted".
TEST(WebhookBatchTest, DataIsTheEventAsPublishedAndAnOmittedBodyIsSentWhole) {
  auto c = MakeCluster("tg_hookdata", Broker());
  ASSERT_TRUE(c);
  RecordingSink sink(200);
  ASSERT_TRUE(sink.ok());
  auto defs = ParseTriggerDefinitions(RetryingBatchYaml("hook_data", sink.Url("/data"), 20),
                                      "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  auto relay = StartRelay(c->store.get(), "hookdata-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(10);
  std::vector<PutResult> results;
  const auto body = [](size_t i) {
    return nlohmann::json{{"i", i}, {"fare", {{"total", 9.5 + static_cast<double>(i)}}}};
  };
  const std::set<CellAddr> small = PutVersion(*c->store, rows, "BASE", 0, body, &results);
  const Uuid big_row = Uuid::Random();
  const nlohmann::json big_body = {
      {"route", std::string(static_cast<size_t>(c->config.kafka.max_event_body_bytes) + 100, 'r')}};
  ASSERT_TRUE(PutCell(*c->store, big_row, "BASE", 0, big_body));
  const CellAddr big{big_row.ToString(), "BASE", 0};

  TriggerWorker w(c->config, Opts("hookdata"));
  ASSERT_EQ("OK", w.on_webhook((*defs)[0]).ToString());
  ASSERT_TRUE(w.Start().ok());
  const bool all = WaitFor(
      [&] {
        const std::set<CellAddr> got = sink.Delivered();
        return got.count(big) && std::includes(got.begin(), got.end(), small.begin(), small.end());
      },
      60s);
  w.Stop();
  relay->Stop();
  ASSERT_TRUE(all) << "delivered " << sink.Delivered().size() << " of " << small.size() + 1;

  std::map<CellAddr, std::string> data;  // each cell's "data" as sent
  for (const auto& r : sink.Requests()) {
    auto batch = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(batch.is_array()) << r.body.substr(0, 300);
    for (const auto& el : batch) {
      auto ev = DecodeCellEvent(el["data"].dump());
      ASSERT_TRUE(ev.ok()) << ev.status().ToString();
      data[AddrOf(ev->cell)] = el["data"].dump();
    }
  }
  ASSERT_EQ(data.size(), small.size() + 1);
  for (size_t i = 0; i < rows.size(); ++i) {
    Cell cell;
    cell.row_key = rows[i];
    cell.column = "BASE";
    cell.ref_key = 0;
    cell.body = body(i);
    cell.shard = results[i].shard;
    cell.added_id = results[i].added_id;
    cell.created_at = results[i].created_at;
    const std::string published =
        EncodeCellEvent("trips", cell, c->config.kafka.max_event_body_bytes);
    EXPECT_EQ(data[AddrOf(cell)], published) << "row " << i;
  }
  auto sent_big = DecodeCellEvent(data[big]);
  ASSERT_TRUE(sent_big.ok());
  EXPECT_FALSE(sent_big->body_omitted);
  EXPECT_TRUE(sent_big->cell.body == big_body)
      << "the large body sent differs (" << sent_big->cell.body.dump().size() << " bytes of JSON)";
  EXPECT_EQ(data[big].find("body_omitted"), std::string::npos);
}

TEST(WebhookBatchTest, AFailingBatchIsRetriedWholeThenEveryEventIsSetAside) {
  auto c = MakeCluster("tg_hookbatchfail", Broker());
  ASSERT_TRUE(c);
  RecordingSink sink(503);
  ASSERT_TRUE(sink.ok());
  auto defs = ParseTriggerDefinitions(RetryingBatchYaml("hook_batch_fail", sink.Url("/down"), 20),
                                      "hooks.yaml", c->config);
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
    // The dead letter holds the event as published, its body included
    // (the webhook's consumer never parses the body).
    const auto row = std::find(rows.begin(), rows.end(), ev->cell.row_key);
    ASSERT_NE(row, rows.end()) << Describe(a);
    EXPECT_EQ(ev->cell.body, (nlohmann::json{{"i", row - rows.begin()}})) << Describe(a);
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

TEST(WebhookBatchTest, PartialFailureRetriesOnlyTheNamedEventsWithTheirRowsLaterEvents) {
  auto c = MakeCluster("tg_hookpartial", Broker());
  ASSERT_TRUE(c);
  // The sink names an event in batchItemFailures while it has seen it no more
  // than its body's fail_times; any other POST gets one of kSuccessAnswers.
  std::map<std::string, int> seen;  // by ce id; under the sink's lock
  size_t successes = 0;
  AnsweringSink sink([&](const std::vector<Posted>& batch) {
    nlohmann::json failed = nlohmann::json::array();
    for (const Posted& p : batch)
      if (++seen[p.id] <= p.cell.body.value("fail_times", 0))
        failed.push_back({{"itemIdentifier", p.id}});
    if (failed.empty()) return kSuccessAnswers[successes++ % kSuccessAnswers.size()];
    return nlohmann::json{{"batchItemFailures", failed}}.dump();
  });
  const std::string name = "hook_partial";
  auto defs =
      ParseTriggerDefinitions(RetryingBatchYaml(name, sink.Url(), 100), "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 1u);

  auto relay = StartRelay(c->store.get(), "hookpartial-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(10);
  for (int v = 0; v < 3; ++v)
    PutVersion(*c->store, rows, "BASE", v, [v](size_t i) {
      nlohmann::json body{{"i", i}, {"v", v}};
      if (i == 0 && v == 0) body["fail_times"] = 1;   // fails once
      if (i == 1 && v == 1) body["fail_times"] = 99;  // always fails
      return body;
    });
  // A backlog when the worker starts: each row's versions go in one POST.
  ASSERT_TRUE(RelayAcknowledged(*relay, 30))
      << "relay acknowledged " << relay->stats().acknowledged;

  TriggerWorker w(c->config, Opts("hookpartial"));
  ASSERT_EQ("OK", w.on_webhook((*defs)[0]).ToString());
  ASSERT_TRUE(w.Start().ok());
  const bool settled = WaitFor(
      [&] {
        const TriggerTotals t = Totals(w, name);
        return t.handled >= 28 && t.set_aside >= 2;
      },
      60s);
  w.Stop();
  relay->Stop();
  const TriggerTotals t = Totals(w, name);
  ASSERT_TRUE(settled) << "handled " << t.handled << ", set aside " << t.set_aside;
  EXPECT_EQ(t.handled, 28u);
  EXPECT_EQ(t.set_aside, 2u);
  EXPECT_EQ(t.retried, 5u + 2u) << "attempt 2: rows 0 and 1 from the failed event on; "
                                   "attempt 3: row 1's versions 1 and 2";
  EXPECT_FALSE(t.paused);

  // Per row, the versions in each POST holding that row, in the order posted.
  const auto posts = sink.Posts();
  std::map<int, std::vector<std::vector<int64_t>>> row_posts;
  for (const auto& batch : posts) {
    std::map<int, std::vector<int64_t>> in_this;
    for (const Posted& p : batch) {
      const int i = p.cell.body.value("i", -1);
      EXPECT_EQ(p.id, CeId(p.cell));
      in_this[i].push_back(p.cell.ref_key);
      EXPECT_EQ(p.cell.row_key.ToString(), rows.at(i).ToString());
    }
    for (auto& [i, refs] : in_this) row_posts[i].push_back(std::move(refs));
  }
  using Refs = std::vector<std::vector<int64_t>>;
  ASSERT_EQ(row_posts.size(), rows.size());
  EXPECT_EQ(row_posts[0], (Refs{{0, 1, 2}, {0, 1, 2}})) << "row 0: failed once at version 0";
  EXPECT_EQ(row_posts[1], (Refs{{0, 1, 2}, {1, 2}, {1, 2}})) << "row 1: fails at version 1";
  for (int i = 2; i < 10; ++i) EXPECT_EQ(row_posts[i], (Refs{{0, 1, 2}})) << "row " << i;

  // Row 1's versions 1 and 2 are set aside, each its own dead letter.
  auto dead = ListDeadLetters(c->config, "trips", name);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  std::map<int64_t, std::pair<DeadLetter, Cell>> by_ref;
  for (const DeadLetter& d : *dead) {
    auto ev = DecodeCellEvent(d.event_json);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    EXPECT_EQ(ev->cell.body.value("i", -1), 1) << Describe(AddrOf(ev->cell));
    EXPECT_EQ(d.trigger, name);
    EXPECT_EQ(d.attempts, 3) << Describe(AddrOf(ev->cell));
    by_ref[ev->cell.ref_key] = {d, ev->cell};
  }
  ASSERT_EQ(dead->size(), 2u);
  ASSERT_TRUE(by_ref.count(1) && by_ref.count(2));
  const std::string& why2 = by_ref[2].first.error;
  EXPECT_THAT(by_ref[1].first.error,
              HasSubstr("reported event " + CeId(by_ref[1].second) + " failed"));
  EXPECT_THAT(why2, HasSubstr("an earlier event of row " + rows[1].ToString()));
  std::cout << "[ webhook batch ] partial failure: " << posts.size() << " POSTs, " << t.handled
            << " handled, " << t.set_aside << " set aside; row 1 version 2: " << why2 << "\n";
}

TEST(WebhookBatchTest, AnUnusableBatchItemFailuresAnswerFailsTheWholeBatch) {
  auto c = MakeCluster("tg_hookunusable", Broker());
  ASSERT_TRUE(c);
  // The first batch posted is answered with an id it does not hold, the
  // second with an item without a string itemIdentifier; any other POST (a
  // repeat of one of them too) succeeds.
  std::map<std::vector<std::string>, int> times_posted;  // under the sink's lock
  size_t successes = 0;
  AnsweringSink sink([&](const std::vector<Posted>& batch) -> std::string {
    std::vector<std::string> ids;
    for (const Posted& p : batch) ids.push_back(p.id);
    if (++times_posted[ids] == 1 && times_posted.size() == 1)
      return R"({"batchItemFailures": [{"itemIdentifier": "nope:0:0"}]})";
    if (times_posted[ids] == 1 && times_posted.size() == 2)
      return R"({"batchItemFailures": [{"itemIdentifier": 7}]})";
    return kSuccessAnswers[successes++ % kSuccessAnswers.size()];
  });
  const std::string name = "hook_unusable";
  auto defs =
      ParseTriggerDefinitions(RetryingBatchYaml(name, sink.Url(), 100), "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 1u);
  auto relay = StartRelay(c->store.get(), "hookunusable-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(30);
  const std::set<CellAddr> want = PutVersion(*c->store, rows, "BASE", 0, [](size_t i) {
    return nlohmann::json{{"i", i}};
  });
  ASSERT_TRUE(RelayAcknowledged(*relay, want.size()))
      << "relay acknowledged " << relay->stats().acknowledged;

  TriggerWorker w(c->config, Opts("hookunusable"));
  ASSERT_EQ("OK", w.on_webhook((*defs)[0]).ToString());
  ASSERT_TRUE(w.Start().ok());
  const bool settled = WaitFor([&] { return Totals(w, name).handled >= want.size(); }, 60s);
  w.Stop();
  relay->Stop();
  const TriggerTotals t = Totals(w, name);
  ASSERT_TRUE(settled) << "handled " << t.handled << " of " << want.size();
  EXPECT_EQ(t.handled, want.size());
  EXPECT_EQ(t.set_aside, 0u);

  // The two batches answered unusably were posted again whole (same events,
  // same order), once; every other event was posted once.
  const auto posts = sink.Posts();
  std::map<std::vector<std::string>, int> times;
  std::vector<std::vector<std::string>> order;  // distinct batches, first post first
  std::map<std::string, int> posts_of_id;
  for (const auto& batch : posts) {
    std::vector<std::string> ids;
    for (const Posted& p : batch) ids.push_back(p.id), ++posts_of_id[p.id];
    if (times[ids]++ == 0) order.push_back(ids);
  }
  ASSERT_GE(order.size(), 2u) << "30 rows in 8 lanes made one batch";
  EXPECT_EQ(times[order[0]], 2) << "unknown id: batch of " << order[0].size();
  EXPECT_EQ(times[order[1]], 2) << "malformed item: batch of " << order[1].size();
  EXPECT_EQ(t.retried, order[0].size() + order[1].size());
  EXPECT_EQ(posts_of_id.size(), want.size());
  for (const auto& [id, n] : posts_of_id) {
    const bool failed = std::count(order[0].begin(), order[0].end(), id) +
                        std::count(order[1].begin(), order[1].end(), id);
    EXPECT_EQ(n, failed ? 2 : 1) << id;
  }
  std::cout << "[ webhook batch ] unusable answers: " << posts.size() << " POSTs, batches of "
            << order[0].size() << " and " << order[1].size() << " posted twice\n";
}

}  // namespace
}  // namespace cellar::trigtest
