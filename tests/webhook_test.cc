// Webhook triggers (triggers/webhook.h) defined in YAML, run by an in-process
// TriggerWorker against a local HTTP server this test starts: the filter keeps
// events away from the server, timeouts, 5xx and 429 are retried, 4xx follows
// on_4xx (dead_letter: set aside at once; drop: counted handled, never
// retried). YAML errors: triggers_unit_test.cc.
#include "triggers/webhook.h"

#include <httplib.h>

#include <condition_variable>
#include <iostream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/webhook_sink.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One request the server received.
struct Request {
  std::string path, trigger, event_id, content_type;
  CellEvent event;
  int call = 0;  // 1 for the first request of this (path, event)
  int answered = 0;
};

// A local webhook receiver. The event body's "mode" says how to answer:
//   ok        200
//   slow      the first call hangs until the retry of the same event arrived
//             (so the caller's timeout fired), then 200; later calls 200
//   flaky     503 twice, then 200
//   throttled 429 once, then 200
//   down      503 always
//   reject    400 always
//   hold      hangs until ReleaseHeldCalls() (or the server closes), then 200
//
// Fair to its callers, as a production receiver is: a new connection is
// accepted and answered at once however many others are open. cpp-httplib
// serves a connection on one pool thread for as long as it stays open (kept
// alive between calls, or a call hanging), with max(8, cores - 1) threads by
// default, and listens with a backlog of 5. Either made a trigger's new
// connection wait past its 1 s timeout (queued behind the held connections,
// or its SYN dropped and resent after 1 s), a failed attempt that the tests
// then saw as a retry by the trigger. kThreads covers every connection the
// tests hold at once: per trigger its concurrency (8), plus the hung "slow"
// and "hold" calls.
class WebhookServer {
 public:
  static constexpr int kThreads = 64;

  WebhookServer() {
    server_.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
    for (const char* path : {"/hook", "/drop"})
      server_.Post(
          path, [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    testing::RaiseListenBacklog(port_);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    EXPECT_TRUE(WaitFor([&] { return server_.is_running(); }, 5s));
  }
  ~WebhookServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // Ends the "hold" calls, and later ones do not hang.
  void ReleaseHeldCalls() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

  int port() const { return port_; }
  std::vector<Request> Requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int Calls(const std::string& path, const CellAddr& a) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find({path, a});
    return it == calls_.end() ? 0 : it->second;
  }
  // True once a call for (path, a) was answered 2xx to a caller still waiting.
  bool Succeeded(const std::string& path, const CellAddr& a) const {
    std::lock_guard<std::mutex> lock(mu_);
    return succeeded_.count({path, a}) > 0;
  }
  int bad_requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_requests_;
  }
  // "hold" calls hanging now.
  int held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    auto ev = DecodeCellEvent(req.body);
    std::unique_lock<std::mutex> lock(mu_);
    if (!ev.ok()) {
      ++bad_requests_;
      res.status = 422;
      return;
    }
    const CellAddr addr = AddrOf(ev->cell);
    const std::pair<std::string, CellAddr> key{req.path, addr};
    const int call = ++calls_[key];
    Request r;
    r.path = req.path;
    r.trigger = req.get_header_value("X-Cellar-Trigger");
    r.event_id = req.get_header_value("X-Cellar-Event-Id");
    r.content_type = req.get_header_value("Content-Type");
    r.event = *ev;
    r.call = call;
    const std::string mode = ev->cell.body.value("mode", "ok");
    int status = 200;
    bool caller_waits = true;
    if (mode == "slow" && call == 1) {
      // Hang past the caller's timeout: until its retry arrives (bounded).
      cv_.wait_for(lock, 20s, [&] { return closing_ || calls_[key] >= 2; });
      caller_waits = false;
    } else if (mode == "flaky" && call <= 2) {
      status = 503;
    } else if (mode == "throttled" && call == 1) {
      status = 429;
    } else if (mode == "down") {
      status = 503;
    } else if (mode == "reject") {
      status = 400;
    } else if (mode == "hold") {
      ++held_;
      cv_.wait(lock, [&] { return closing_ || released_; });
      --held_;
    }
    r.answered = status;
    if (status == 200 && caller_waits) succeeded_.insert(key);
    requests_.push_back(std::move(r));
    cv_.notify_all();
    res.status = status;
    res.set_content(status == 200 ? "ok" : "no", "text/plain");
  }

  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool closing_ = false;
  bool released_ = false;
  int held_ = 0;
  std::map<std::pair<std::string, CellAddr>, int> calls_;
  std::set<std::pair<std::string, CellAddr>> succeeded_;
  std::vector<Request> requests_;
  int bad_requests_ = 0;
};

std::string TriggersYaml(int port) {
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  return R"(triggers:
  - name: hook_main
    datastore: trips
    column: BASE
    filter:
      - { field: status, op: "=", value: requested }
      - { field: fare.total, op: ">=", value: 20 }
    webhook: { url: ")" +
         base + R"(/hook", timeout_ms: 1000 }
    retry: { max_attempts: 5, initial_backoff_ms: 20, max_backoff_ms: 100, on_4xx: dead_letter }
    dead_letter: { pause_after: 100, window: 10m }
  - name: hook_drop
    datastore: trips
    column: BASE
    filter:
      - { field: mode, value: reject }
    webhook: { url: ")" +
         base + R"(/drop", timeout_ms: 1000 }
    retry: { max_attempts: 5, initial_backoff_ms: 20, max_backoff_ms: 100, on_4xx: drop }
)";
}

TEST(WebhookTest, FilterTimeoutsServerErrorsAndClientErrorsFollowThePolicy) {
  auto c = MakeCluster("tg_hook", Broker());
  ASSERT_TRUE(c);
  WebhookServer server;
  auto defs = ParseTriggerDefinitions(TriggersYaml(server.port()), "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  ASSERT_EQ(defs->size(), 2u);
  EXPECT_EQ((*defs)[0].on_4xx, On4xx::kDeadLetter);
  EXPECT_EQ((*defs)[1].on_4xx, On4xx::kDrop);

  auto relay = StartRelay(c->store.get(), "hook-relay");
  ASSERT_TRUE(relay);
  TriggerWorkerOptions wopts;
  wopts.client_id = "hook";
  wopts.drain_timeout_ms = 10000;
  TriggerWorker w(c->config, wopts);
  for (const auto& d : *defs) ASSERT_EQ("OK", w.on_webhook(d).ToString());
  ASSERT_TRUE(w.Start().ok());

  // Events. Passing the filter (status requested, fare.total >= 20), by mode:
  std::map<std::string, std::set<CellAddr>> pass;
  std::set<CellAddr> filtered;
  std::map<CellAddr, nlohmann::json> bodies;
  auto put = [&](const nlohmann::json& body, bool passes, int64_t ref = 0,
                 const Uuid& row = Uuid::Random()) {
    if (!PutCell(*c->store, row, "BASE", ref, body)) return;
    const CellAddr a{row.ToString(), "BASE", ref};
    bodies[a] = body;
    (passes ? pass[body.value("mode", "ok")] : filtered).insert(a);
  };
  auto trip = [](const std::string& mode, double fare) {
    return nlohmann::json{
        {"status", "requested"}, {"mode", mode}, {"fare", {{"total", fare}, {"currency", "EUR"}}}};
  };
  for (int i = 0; i < 8; ++i) put(trip("ok", 20 + i), true);
  for (int i = 0; i < 3; ++i) put(trip("slow", 40), true);
  for (int i = 0; i < 3; ++i) put(trip("flaky", 41), true);
  for (int i = 0; i < 2; ++i) put(trip("throttled", 42), true);
  put(trip("down", 43), true);
  for (int i = 0; i < 3; ++i) put(trip("reject", 44), true);
  // Filtered out: every condition must hold, missing fields and type mismatches fail.
  for (int i = 0; i < 3; ++i) {
    auto cancelled = trip("ok", 50);
    cancelled["status"] = "cancelled";
    put(cancelled, false);
    put(trip("ok", 19.99), false);                          // too cheap
    put({{"status", "requested"}, {"mode", "ok"}}, false);  // no fare
    auto text_fare = trip("ok", 0);
    text_fare["fare"]["total"] = "25";  // a string is not a number
    put(text_fare, false);
    put({{"mode", "ok"}, {"fare", {{"total", 30}}}}, false);  // no status
  }
  // One row whose versions alternate: the filter applies per event.
  const Uuid mixed = Uuid::Random();
  put(trip("ok", 30), true, 0, mixed);
  auto mixed_cancelled = trip("ok", 30);
  mixed_cancelled["status"] = "cancelled";
  put(mixed_cancelled, false, 1, mixed);
  put(trip("ok", 31), true, 2, mixed);

  // Wait: every event that should succeed got a 2xx, the rejected ones were
  // seen by both triggers, the one whose server is down was set aside.
  std::set<CellAddr> waiting;
  const bool settled = WaitFor(
      [&] {
        waiting.clear();
        for (const char* mode : {"ok", "slow", "flaky", "throttled"})
          for (const auto& a : pass[mode])
            if (!server.Succeeded("/hook", a)) waiting.insert(a);
        for (const auto& a : pass["reject"])
          if (server.Calls("/hook", a) < 1 || server.Calls("/drop", a) < 1) waiting.insert(a);
        return waiting.empty() && Totals(w, "hook_main").set_aside >= 4 &&
               Totals(w, "hook_drop").handled >= 3;
      },
      60s, 50ms);
  ASSERT_TRUE(settled) << "still waiting for " << DescribeSome(waiting) << "; hook_main set aside "
                       << Totals(w, "hook_main").set_aside << ", hook_drop handled "
                       << Totals(w, "hook_drop").handled;
  // Both groups committed past every event (so the filtered ones were decided too).
  for (const char* name : {"hook_main", "hook_drop"}) {
    int64_t lag = -1;
    EXPECT_TRUE(WaitFor(
        [&] {
          auto l = ReadTriggerLag(c->config, "trips", name);
          lag = l.ok() ? l->total_lag : -1;
          return lag == 0;
        },
        30s, 200ms))
        << name << " lag " << lag;
  }

  // The filter kept events away from the server.
  for (const auto& a : filtered) {
    EXPECT_EQ(server.Calls("/hook", a), 0) << "filtered event reached the server: " << Describe(a);
    EXPECT_EQ(server.Calls("/drop", a), 0) << Describe(a);
  }
  // Retries: a timeout once, 503 twice, 429 once, each then succeeded.
  for (const auto& a : pass["slow"]) EXPECT_GE(server.Calls("/hook", a), 2) << Describe(a);
  for (const auto& a : pass["flaky"]) EXPECT_GE(server.Calls("/hook", a), 3) << Describe(a);
  for (const auto& a : pass["throttled"]) EXPECT_GE(server.Calls("/hook", a), 2) << Describe(a);
  for (const auto& a : pass["ok"]) EXPECT_GE(server.Calls("/hook", a), 1) << Describe(a);
  // 5xx forever: every configured attempt, then set aside.
  const CellAddr down = *pass["down"].begin();
  EXPECT_EQ(server.Calls("/hook", down), 5);
  // 4xx: dead_letter sets aside at once (one call), drop counts it handled (one call).
  for (const auto& a : pass["reject"]) {
    EXPECT_EQ(server.Calls("/hook", a), 1) << "a 4xx was retried: " << Describe(a);
    EXPECT_EQ(server.Calls("/drop", a), 1) << "a dropped 4xx was retried: " << Describe(a);
  }
  // Only the rejected events reached the drop trigger.
  for (const auto& [mode, addrs] : pass) {
    if (mode == "reject") continue;
    for (const auto& a : addrs) EXPECT_EQ(server.Calls("/drop", a), 0) << Describe(a);
  }

  const TriggerTotals main = Totals(w, "hook_main"), drop = Totals(w, "hook_drop");
  EXPECT_EQ(main.set_aside, 4u);                        // 3 rejected + 1 down
  EXPECT_GE(main.retried, 3u * 1 + 3 * 2 + 2 * 1 + 4);  // slow, flaky, throttled, down
  EXPECT_EQ(drop.set_aside, 0u);
  EXPECT_EQ(drop.handled, 3u);
  EXPECT_EQ(drop.retried, 0u);
  EXPECT_FALSE(main.paused);

  // The dead letters of hook_main: the rejected events after 1 attempt and the
  // down one after 5, with the server's answer as the error.
  auto dead = ListDeadLetters(c->config, "trips", "hook_main");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  std::map<CellAddr, DeadLetter> by_addr;
  for (const auto& d : *dead) {
    auto ev = DecodeCellEvent(d.event_json);
    ASSERT_TRUE(ev.ok()) << d.event_json;
    by_addr[AddrOf(ev->cell)] = d;
  }
  EXPECT_EQ(dead->size(), 4u);
  for (const auto& a : pass["reject"]) {
    ASSERT_TRUE(by_addr.count(a)) << "not in the DLQ: " << Describe(a);
    EXPECT_EQ(by_addr[a].attempts, 1);
    EXPECT_THAT(by_addr[a].error, HasSubstr("answered 400"));
    EXPECT_EQ(by_addr[a].trigger, "hook_main");
  }
  ASSERT_TRUE(by_addr.count(down));
  EXPECT_EQ(by_addr[down].attempts, 5);
  EXPECT_THAT(by_addr[down].error, HasSubstr("answered 503"));
  auto dropped = ListDeadLetters(c->config, "trips", "hook_drop");
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_THAT(*dropped, IsEmpty()) << "on_4xx: drop must not set aside";

  // What the server received: the event JSON with its headers.
  EXPECT_EQ(server.bad_requests(), 0);
  for (const Request& r : server.Requests()) {
    const Cell& cell = r.event.cell;
    EXPECT_EQ(r.trigger, r.path == "/hook" ? "hook_main" : "hook_drop");
    EXPECT_EQ(r.event_id,
              "trips/" + std::to_string(cell.shard) + "/" + std::to_string(cell.added_id));
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_EQ(r.event.datastore, "trips");
    EXPECT_FALSE(r.event.body_omitted);
    EXPECT_EQ(cell.body, bodies[AddrOf(cell)]) << Describe(AddrOf(cell));
  }
  // The mixed row: versions 0 and 2 in order (first calls), never 1.
  std::vector<int64_t> mixed_seen;
  for (const Request& r : server.Requests())
    if (r.path == "/hook" && r.event.cell.row_key == mixed && r.call == 1)
      mixed_seen.push_back(r.event.cell.ref_key);
  EXPECT_EQ(mixed_seen, (std::vector<int64_t>{0, 2}));
  std::cout << "[ webhook ] " << server.Requests().size() << " requests; " << filtered.size()
            << " events filtered out; hook_main retried " << main.retried << ", set aside "
            << main.set_aside << "; hook_drop handled " << drop.handled << "\n";
  w.Stop();
  relay->Stop();
}

// The test server answers a trigger's new connections at once while other
// callers hold as many connections as in the test above: hook_main keeps up
// to its concurrency (8) of connections open (kept alive between calls) and
// the first calls of its 3 "slow" events hang after their caller timed out.
// A server without a free thread for a new connection queues it, the
// caller's timeout fails the attempt and hook_drop, whose 4xx is dropped and
// must never be retried, counts retries: the flake of the test above
// (drop.retried 2). Here "hold" calls, which hang until released, are the
// held connections, so the test does not depend on keep-alive timing.
TEST(WebhookTest, ConnectionsHeldByOtherCallersDoNotMakeADroppedClientErrorRetry) {
  auto c = MakeCluster("tg_hookheld", Broker());
  ASSERT_TRUE(c);
  WebhookServer server;
  auto defs = ParseTriggerDefinitions(TriggersYaml(server.port()), "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  auto relay = StartRelay(c->store.get(), "hookheld-relay");
  ASSERT_TRUE(relay);
  TriggerWorker w(c->config, Opts("hookheld"));
  for (const auto& d : *defs) {
    if (d.name == "hook_drop") {
      ASSERT_EQ("OK", w.on_webhook(d).ToString());
    }
  }
  ASSERT_TRUE(w.Start().ok());

  constexpr int kHeld = 8 + 3;
  // Released and joined however the test ends.
  struct Holders {
    WebhookServer& server;
    std::vector<std::thread> threads;
    ~Holders() {
      server.ReleaseHeldCalls();
      for (std::thread& t : threads) t.join();
    }
  } holders{server, {}};
  for (int i = 0; i < kHeld; ++i) {
    Cell cell;
    cell.row_key = Uuid::Random();
    cell.column = "BASE";
    cell.body = {{"mode", "hold"}};
    holders.threads.emplace_back(
        [port = server.port(), body = EncodeCellEvent("trips", cell, INT64_MAX)] {
          httplib::Client client("127.0.0.1", port);
          client.set_read_timeout(120, 0);
          client.Post("/hook", body, "application/json");
        });
  }
  EXPECT_TRUE(WaitFor([&] { return server.held() == kHeld; }, 10s))
      << "the server holds " << server.held() << " of " << kHeld << " calls";

  std::set<CellAddr> rejected;
  for (int i = 0; i < 3; ++i) {
    const Uuid row = Uuid::Random();
    if (PutCell(*c->store, row, "BASE", 0, {{"mode", "reject"}}))
      rejected.insert({row.ToString(), "BASE", 0});
  }
  ASSERT_EQ(rejected.size(), 3u);
  // Decided: dropped (handled) or, after every attempt failed, set aside.
  const bool decided = WaitFor(
      [&] {
        const TriggerTotals t = Totals(w, "hook_drop");
        return t.handled + t.set_aside >= rejected.size();
      },
      60s, 50ms);
  const TriggerTotals drop = Totals(w, "hook_drop");
  EXPECT_TRUE(decided) << "hook_drop handled " << drop.handled << ", set aside " << drop.set_aside;
  EXPECT_EQ(server.held(), kHeld) << "the held calls were not held throughout";
  EXPECT_EQ(drop.retried, 0u) << "an attempt of the dropping trigger failed (its new connection "
                                 "was not answered within its timeout)";
  EXPECT_EQ(drop.handled, rejected.size());
  EXPECT_EQ(drop.set_aside, 0u);
  for (const auto& a : rejected) EXPECT_EQ(server.Calls("/drop", a), 1) << Describe(a);
  auto dead = ListDeadLetters(c->config, "trips", "hook_drop");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  for (const DeadLetter& d : *dead)
    ADD_FAILURE() << "set aside after " << d.attempts << " attempts: " << d.error;
  w.Stop();
  relay->Stop();
}

// Erases reach webhooks by default: the tombstone's delivery has
// "tombstone": true and "body": null and comes after the row's earlier
// version; `include_tombstones: false` in the YAML leaves it out.
TEST(WebhookTest, EraseIsDeliveredAsATombstoneByDefaultAndNotWhenTurnedOff) {
  auto c = MakeCluster("tg_hookerase", Broker());
  ASSERT_TRUE(c);
  std::mutex mu;
  std::map<std::string, std::vector<nlohmann::json>> received;  // by path, arrival order
  auto sink = testing::WebhookSink::Start([&](const std::string& path, const std::string& body) {
    auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 400;
    std::lock_guard<std::mutex> lock(mu);
    received[path].push_back(std::move(j));
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  const std::string yaml =
      "triggers:\n"
      "  - name: hook_all\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    webhook: { url: \"" +
      (*sink)->Url("/all") +
      "\" }\n"
      "  - name: hook_live\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    include_tombstones: false\n"
      "    webhook: { url: \"" +
      (*sink)->Url("/live") + "\" }\n";
  auto defs = ParseTriggerDefinitions(yaml, "hooks.yaml", c->config);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  auto relay = StartRelay(c->store.get(), "hookerase-relay");
  ASSERT_TRUE(relay);
  TriggerWorker w(c->config, Opts("hookerase"));
  for (const auto& d : *defs) ASSERT_EQ("OK", w.on_webhook(d).ToString());
  ASSERT_TRUE(w.Start().ok());

  const std::vector<Uuid> rows = NewRows(6);
  PutVersion(*c->store, rows, "BASE", 0, [](size_t i) { return nlohmann::json{{"n", i}}; });
  for (const Uuid& r : rows) {
    auto e = c->store->Erase("trips", r, "BASE");
    ASSERT_TRUE(e.ok()) << e.status().ToString();
  }
  auto count = [&](const std::string& path) {
    std::lock_guard<std::mutex> lock(mu);
    return received[path].size();
  };
  ASSERT_TRUE(WaitFor([&] { return count("/all") >= 2 * rows.size(); }, 30s))
      << "deliveries to /all: " << count("/all");
  ASSERT_TRUE(WaitFor([&] { return count("/live") >= rows.size(); }, 30s));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto l = ReadTriggerLag(c->config, "trips", "hook_live");
        return l.ok() && l->total_lag == 0;
      },
      30s, 200ms));
  w.Stop();
  relay->Stop();

  std::lock_guard<std::mutex> lock(mu);
  // Delivery is at least once: a repeat (an attempt the sink answered but the
  // client saw fail is retried) is allowed; each row's first deliveries must
  // be its version, then its tombstone, and nothing else may arrive.
  std::map<std::string, std::vector<nlohmann::json>> by_row;  // first deliveries, in order
  for (const auto& j : received["/all"]) {
    auto& events = by_row[j.value("row_key", "")];
    bool repeat = false;
    for (const auto& e : events) repeat = repeat || e == j;
    if (!repeat) events.push_back(j);
  }
  ASSERT_EQ(by_row.size(), rows.size());
  for (const auto& [row, events] : by_row) {
    ASSERT_EQ(events.size(), 2u) << row << ": " << nlohmann::json(events).dump();
    EXPECT_EQ(events[0]["ref_key"], 0) << row;
    EXPECT_EQ(events[0]["tombstone"], false) << row;
    EXPECT_EQ(events[1]["ref_key"], 1) << row;
    EXPECT_EQ(events[1]["tombstone"], true) << row << ": " << events[1].dump();
    EXPECT_TRUE(events[1].contains("body") && events[1]["body"].is_null()) << events[1].dump();
  }
  std::set<std::string> live_rows;
  for (const auto& j : received["/live"]) live_rows.insert(j.value("row_key", ""));
  EXPECT_EQ(live_rows.size(), rows.size());
  for (const auto& j : received["/live"])
    EXPECT_EQ(j["tombstone"], false) << "include_tombstones: false delivered " << j.dump();
}

}  // namespace
}  // namespace cellar::trigtest
