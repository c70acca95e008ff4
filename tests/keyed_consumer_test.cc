// The shared at-least-once keyed consumer (changelog/keyed_consumer.h) on its
// own, against the private MariaDB, the local broker and an in-process relay:
// back-pressure (polling stopped many times, fetching paused once the pool
// stayed full for a while) loses nothing and keeps each row in order, and a stop abandons what it
// cannot finish within its drain, commits only the finished prefix, and the group's next member
// gets the rest. Part of the trigger_test binary (its environment).
#include "changelog/keyed_consumer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "changelog/consumer_probe.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "tests/trigger_test_util.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;

using ::cellar::testing::MetricValue;

int64_t GroupLag(const ClusterConfig& config, const std::string& group) {
  auto lag = ReadGroupLag(config, group, {ChangeLogTopic(config.kafka, "trips")});
  return lag.ok() ? lag->total : -1;
}

KeyedConsumerOptions Options(const std::string& group, int concurrency, int max_pending) {
  KeyedConsumerOptions o;
  o.group_id = group;
  o.client_id = "keyed-consumer-test";
  o.datastores = {"trips"};
  o.concurrency = concurrency;
  o.max_pending = max_pending;
  return o;
}

// Handlers wait at a gate until the test opens it (at most 60 s).
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 60s, [&] { return open_; });
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(KeyedConsumerTest, BackPressureLosesNothingAndKeepsEachRowInOrder) {
  auto c = MakeCluster("kc_order", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "kc-order-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(20);
  constexpr int64_t kVersions = 10;
  for (int64_t v = 1; v <= kVersions; ++v)
    PutVersion(*c->store, rows, "BASE", v, [&](size_t i) { return nlohmann::json{{"i", i}}; });

  // Handlers wait at a gate the test opens: until then the pool stays full.
  Gate gate;
  std::mutex mu;
  std::map<std::string, std::vector<int64_t>> seen;  // row -> ref_keys in handling order
  size_t total = 0;
  std::atomic<int> mismatches{0};
  KeyedConsumerCallbacks cb;
  cb.handle = [&](KeyedEvent& e) {
    gate.Wait();
    // Some work per event (a read of the cell), slower than fetching.
    const Cell& cell = e.event.cell;
    auto stored = c->store->Get("trips", cell.row_key, cell.column, cell.ref_key);
    if (!stored.ok() || stored->body != cell.body) ++mismatches;
    std::lock_guard<std::mutex> lock(mu);
    seen[cell.row_key.ToString()].push_back(cell.ref_key);
    ++total;
    return Disposition::kDone;
  };
  // At most 3 events queued or running: the 200 events pass through many
  // short stops of polling, and one long one that pauses fetching.
  const std::string group = c->prefix + ".kc";
  MetricsRegistry metrics;
  KeyedConsumerOptions options = Options(group, 2, 3);
  options.metrics = &metrics;
  KeyedConsumer kc(c->store.get(), options, cb);
  auto fetch_paused = [&] {
    return MetricValue(metrics.Render(), "cellar_consumer_fetch_paused", {{"group", group}});
  };
  EXPECT_EQ(fetch_paused(), 0) << "the probe registers the gauge at construction";
  ASSERT_TRUE(kc.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return fetch_paused() == 1; }, 30s))
      << "a pool full for over a second did not pause fetching";
  gate.Open();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return total >= rows.size() * kVersions;
      },
      60s))
      << "handled " << total << " of " << rows.size() * kVersions;
  ASSERT_TRUE(WaitFor([&] { return GroupLag(c->config, group) == 0; }, 30s));
  EXPECT_EQ(fetch_paused(), 0) << "fetching was not resumed";
  kc.Stop(5000);
  // No body was left out of these events: nothing was read again.
  EXPECT_EQ(MetricValue(metrics.Render(), "cellar_consumer_body_rereads_total", {{"group", group}}),
            0);
  // Each event was decoded once on its way to the handler.
  EXPECT_GE(
      MetricValue(metrics.Render(), "cellar_consumer_records_decoded_total", {{"group", group}}),
      static_cast<double>(rows.size() * kVersions));

  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(total, rows.size() * kVersions) << "an event was handled twice";
  EXPECT_EQ(mismatches.load(), 0) << "an event's body differs from the stored cell's";
  for (const Uuid& row : rows) {
    std::vector<int64_t> want;
    for (int64_t v = 1; v <= kVersions; ++v) want.push_back(v);
    EXPECT_EQ(seen[row.ToString()], want) << "row " << row.ToString();
  }
}

TEST(KeyedConsumerTest, StopAbandonsWhatItCannotFinishAndTheGroupsNextMemberGetsIt) {
  auto c = MakeCluster("kc_stop", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "kc-stop-relay");
  ASSERT_TRUE(relay);
  const Uuid stuck = Uuid::Random();
  const std::vector<Uuid> others = NewRows(10);
  ASSERT_TRUE(PutCell(*c->store, stuck, "BASE", 1, {{"stuck", true}}));
  PutVersion(*c->store, others, "BASE", 1, [](size_t) { return nlohmann::json{{"ok", true}}; });
  const std::string group = c->prefix + ".kc";

  // The first member handles everything but `stuck`, whose handler waits
  // until the consumer stops and then gives up.
  std::atomic<int> first_done{0};
  std::atomic<bool> stuck_started{false};
  std::unique_ptr<KeyedConsumer> first;
  KeyedConsumerCallbacks cb1;
  cb1.handle = [&](KeyedEvent& e) {
    if (e.event.cell.row_key != stuck) {
      ++first_done;
      return Disposition::kDone;
    }
    stuck_started = true;
    return first->WaitUnlessStopping(60000) ? Disposition::kDone : Disposition::kAbandoned;
  };
  first = std::make_unique<KeyedConsumer>(c->store.get(), Options(group, 4, 100), cb1);
  ASSERT_TRUE(first->Start().ok());
  ASSERT_TRUE(
      WaitFor([&] { return stuck_started && first_done == static_cast<int>(others.size()); }, 30s));

  const auto t0 = std::chrono::steady_clock::now();
  first->Stop(/*drain_timeout_ms=*/200);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, 5s) << "the drain is not bounded";
  EXPECT_GE(GroupLag(c->config, group), 1) << "the abandoned event was committed past";

  std::atomic<int> stuck_seen{0};
  KeyedConsumerCallbacks cb2;
  cb2.handle = [&](KeyedEvent& e) {
    if (e.event.cell.row_key == stuck) ++stuck_seen;
    return Disposition::kDone;
  };
  KeyedConsumer second(c->store.get(), Options(group, 4, 100), cb2);
  ASSERT_TRUE(second.Start().ok());
  EXPECT_TRUE(WaitFor([&] { return stuck_seen == 1; }, 30s)) << "the abandoned event was lost";
  EXPECT_TRUE(WaitFor([&] { return GroupLag(c->config, group) == 0; }, 30s));
  second.Stop(5000);
}

// Batch mode: every event handed on once, in order per row, one call per lane
// at a time, and the events that queue while a call runs come in one call.
TEST(KeyedConsumerTest, BatchModeHandsEachLanesQueuedEventsOnInOneCall) {
  auto c = MakeCluster("kc_batch", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "kc-batch-relay");
  ASSERT_TRUE(relay);
  const std::vector<Uuid> rows = NewRows(20);
  constexpr int64_t kVersions = 10;
  for (int64_t v = 1; v <= kVersions; ++v)
    PutVersion(*c->store, rows, "BASE", v, [&](size_t i) { return nlohmann::json{{"i", i}}; });

  auto lane_of = [](const CellEvent& e) {
    return "lane" + std::to_string(static_cast<unsigned char>(e.cell.row_key.ToBytes()[15]) % 3);
  };
  // The first call waits at a gate, so the rest of the log queues behind it.
  Gate gate;
  std::mutex mu;
  std::map<std::string, std::vector<int64_t>> seen;  // row -> ref_keys in handling order
  std::map<std::string, int> running;                // lane -> calls in progress
  size_t total = 0, largest = 0;
  int overlaps = 0, mixed = 0;
  KeyedConsumerCallbacks cb;
  cb.lane = lane_of;
  cb.handle_batch = [&](std::vector<KeyedEvent*>& batch) {
    const std::string lane = lane_of(batch.front()->event);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (running[lane]++ > 0) ++overlaps;
    }
    gate.Wait();
    std::lock_guard<std::mutex> lock(mu);
    --running[lane];
    largest = std::max(largest, batch.size());
    for (KeyedEvent* e : batch) {
      if (lane_of(e->event) != lane) ++mixed;
      seen[e->event.cell.row_key.ToString()].push_back(e->event.cell.ref_key);
      ++total;
    }
    return Disposition::kDone;
  };
  const std::string group = c->prefix + ".kcb";
  KeyedConsumerOptions options = Options(group, 4, 1000);
  options.max_batch = 64;
  KeyedConsumer kc(c->store.get(), options, cb);
  ASSERT_TRUE(kc.Start().ok());
  // Let the log queue up behind the waiting calls, then open the gate.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto progress = kc.Progress();
        size_t open = 0;
        for (const auto& p : progress) open += p.open;
        return open >= rows.size() * kVersions;
      },
      30s))
      << "the log did not queue up";
  gate.Open();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return total >= rows.size() * kVersions;
      },
      60s))
      << "handled " << total << " of " << rows.size() * kVersions;
  ASSERT_TRUE(WaitFor([&] { return GroupLag(c->config, group) == 0; }, 30s));
  kc.Stop(5000);

  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(total, rows.size() * kVersions) << "an event was handed on twice";
  EXPECT_EQ(overlaps, 0) << "two calls of one lane overlapped";
  EXPECT_EQ(mixed, 0) << "a call held another lane's event";
  EXPECT_GT(largest, 1u) << "queued events did not come in one call";
  EXPECT_LE(largest, 64u) << "a call exceeded max_batch";
  for (const Uuid& row : rows) {
    std::vector<int64_t> want;
    for (int64_t v = 1; v <= kVersions; ++v) want.push_back(v);
    EXPECT_EQ(seen[row.ToString()], want) << "row " << row.ToString();
  }
}

// Calls of one lane with batch_linger_ms, each recorded with its events and
// when it ran.
struct LingerCalls {
  std::mutex mu;
  std::vector<size_t> sizes;
  std::vector<std::chrono::steady_clock::time_point> at;
  size_t events() {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (size_t s : sizes) n += s;
    return n;
  }
};

KeyedConsumerCallbacks LingerCallbacks(LingerCalls* calls) {
  KeyedConsumerCallbacks cb;
  cb.lane = [](const CellEvent&) { return std::string("one-lane"); };
  cb.handle_batch = [calls](std::vector<KeyedEvent*>& batch) {
    std::lock_guard<std::mutex> lock(calls->mu);
    calls->sizes.push_back(batch.size());
    calls->at.push_back(std::chrono::steady_clock::now());
    return Disposition::kDone;
  };
  return cb;
}

size_t OpenEvents(const KeyedConsumer& kc) {
  size_t open = 0;
  for (const auto& p : kc.Progress()) open += p.open;
  return open;
}

// A cluster with a relay and a started one-lane batch consumer whose calls
// are recorded. Members go in reverse order: the consumer before what its
// callbacks use.
struct LingeringConsumer {
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<Relay> relay;
  LingerCalls calls;
  std::unique_ptr<KeyedConsumer> kc;
};

std::unique_ptr<LingeringConsumer> StartLingering(const std::string& name, int linger_ms,
                                                  int max_batch) {
  auto l = std::make_unique<LingeringConsumer>();
  l->cluster = MakeCluster(name, Broker());
  if (!l->cluster) return nullptr;
  l->relay = StartRelay(l->cluster->store.get(), name + "-relay");
  if (!l->relay) return nullptr;
  KeyedConsumerOptions options = Options(l->cluster->prefix + ".linger", 2, 1000);
  options.batch_linger_ms = linger_ms;
  options.max_batch = max_batch;
  l->kc =
      std::make_unique<KeyedConsumer>(l->cluster->store.get(), options, LingerCallbacks(&l->calls));
  if (!l->kc->Start().ok()) return nullptr;
  return l;
}

// Events that arrive one by one within the linger are handed on in one call,
// no sooner than the linger after the first.
TEST(KeyedConsumerTest, BatchLingerGathersEventsThatArriveOneByOne) {
  auto l = StartLingering("kc_linger", 6000, 500);
  ASSERT_TRUE(l);
  constexpr size_t kCells = 4;
  const std::vector<Uuid> rows = NewRows(kCells);
  const auto first_put = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kCells; ++i) {
    PutVersion(*l->cluster->store, {rows[i]}, "BASE", 1, [&](size_t) {
      return nlohmann::json{{"i", i}};
    });
    // Each event reaches the consumer before the next is written.
    ASSERT_TRUE(WaitFor([&] { return OpenEvents(*l->kc) + l->calls.events() >= i + 1; }, 20s))
        << "event " << i << " did not arrive";
  }
  ASSERT_TRUE(WaitFor([&] { return l->calls.events() >= kCells; }, 30s));
  l->kc->Stop(5000);
  std::lock_guard<std::mutex> lock(l->calls.mu);
  EXPECT_EQ(l->calls.sizes, std::vector<size_t>{kCells}) << "the lane did not linger for its batch";
  ASSERT_FALSE(l->calls.at.empty());
  EXPECT_GE(l->calls.at.front() - first_put, 6000ms) << "the call did not wait for the linger";
}

// A full batch goes at once, and Stop() hands a lingering batch on within its
// drain instead of waiting out the linger.
TEST(KeyedConsumerTest, BatchLingerEndsWhenTheBatchIsFullOrTheConsumerStops) {
  auto l = StartLingering("kc_linger_end", 120000, 3);
  ASSERT_TRUE(l);
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };
  PutVersion(*l->cluster->store, NewRows(3), "BASE", 1, body);
  EXPECT_TRUE(WaitFor([&] { return l->calls.events() >= 3; }, 30s))
      << "a full batch waited for the linger";

  PutVersion(*l->cluster->store, NewRows(1), "BASE", 1, body);
  ASSERT_TRUE(WaitFor([&] { return OpenEvents(*l->kc) >= 1; }, 20s)) << "the event did not arrive";
  const auto stop_at = std::chrono::steady_clock::now();
  l->kc->Stop(30000);
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, 20s) << "Stop() waited out the linger";
  EXPECT_EQ(l->calls.events(), 4u) << "the lingering event was not handed on in the drain";
}

TEST(KeyedConsumerTest, BatchModeNeedsALane) {
  auto c = MakeCluster("kc_nolane", Broker());
  ASSERT_TRUE(c);
  KeyedConsumerCallbacks cb;
  cb.handle_batch = [](std::vector<KeyedEvent*>&) { return Disposition::kDone; };
  KeyedConsumer kc(c->store.get(), Options(c->prefix + ".x", 1, 10), cb);
  Status s = kc.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lane"), std::string::npos) << s.ToString();
  cb.handle = [](KeyedEvent&) { return Disposition::kDone; };
  cb.lane = [](const CellEvent&) { return std::string("x"); };
  KeyedConsumer both(c->store.get(), Options(c->prefix + ".y", 1, 10), cb);
  EXPECT_EQ(both.Start().code(), StatusCode::kInvalidArgument);
}

// The consumer's probe registers each series of its group once, at 0, and
// hands out the same series to every update.
TEST(KeyedConsumerTest, ProbeRegistersTheGroupsSeriesAtZero) {
  MetricsRegistry metrics;
  ConsumerProbe probe(&metrics, "g1");
  auto rereads = [&](const std::string& outcome) {
    return MetricValue(metrics.Render(), "cellar_consumer_body_rereads_total",
                       {{"group", "g1"}, {"outcome", outcome}});
  };
  auto paused = [&] {
    return MetricValue(metrics.Render(), "cellar_consumer_fetch_paused", {{"group", "g1"}});
  };
  auto skipped = [&] {
    return MetricValue(metrics.Render(), "cellar_consumer_skipped_records_total",
                       {{"group", "g1"}});
  };
  for (const char* outcome : {"ok", "retry", "not_found", "error"})
    EXPECT_EQ(rereads(outcome), 0) << outcome;
  EXPECT_EQ(paused(), 0);
  EXPECT_EQ(skipped(), 0);
  EXPECT_EQ(
      MetricValue(metrics.Render(), "cellar_consumer_records_decoded_total", {{"group", "g1"}}), 0);
  probe.SkippedRecords().Increment(9);
  EXPECT_EQ(skipped(), 9);

  probe.BodyRereads(BodyRereadOutcome::kRetry).Increment(2);
  probe.BodyRereads(BodyRereadOutcome::kOk).Increment();
  probe.BodyRereads(BodyRereadOutcome::kError).Increment();
  probe.FetchPaused().Set(1);
  EXPECT_EQ(rereads("ok"), 1);
  EXPECT_EQ(rereads("retry"), 2);
  EXPECT_EQ(rereads("not_found"), 0);
  EXPECT_EQ(rereads("error"), 1);
  EXPECT_EQ(paused(), 1);
  // Another group's series are apart.
  ConsumerProbe other(&metrics, "g2");
  other.BodyRereads(BodyRereadOutcome::kNotFound).Increment();
  EXPECT_EQ(rereads("not_found"), 0);
  EXPECT_EQ(MetricValue(metrics.Render(), "cellar_consumer_body_rereads_total",
                        {{"group", "g2"}, {"outcome", "not_found"}}),
            1);
}

// A paused consumer with nothing in hand: the partition ends are asked from
// the broker (no fetch refreshes them), so cells written after Pause() are its
// lag, and their age comes from the record at the next offset, looked up in
// Kafka (PartitionProgress::oldest_timestamp_ms).
TEST(KeyedConsumerTest, PausedWithNothingInHandReportsLagAndTheAgeOfTheNextRecord) {
  auto c = MakeCluster("kc_paused", Broker());
  ASSERT_TRUE(c);
  auto relay = StartRelay(c->store.get(), "kc-paused-relay");
  ASSERT_TRUE(relay);
  auto body = [](size_t i) { return nlohmann::json{{"i", i}}; };
  // Rows on every partition, so that each is assigned and read before the pause.
  constexpr size_t kRows = 40;
  PutVersion(*c->store, NewRows(kRows), "BASE", 1, body);
  std::atomic<size_t> handled{0};
  KeyedConsumerCallbacks cb;
  cb.handle = [&](KeyedEvent&) {
    ++handled;
    return Disposition::kDone;
  };
  std::mutex mu;
  std::vector<PartitionProgress> last;
  cb.on_progress = [&](const std::vector<PartitionProgress>& p) {
    std::lock_guard<std::mutex> lock(mu);
    last = p;
  };
  MetricsRegistry metrics;
  KeyedConsumerOptions options = Options(c->prefix + ".kc", 2, 100);
  options.metrics = &metrics;
  KeyedConsumer kc(c->store.get(), options, cb);
  ASSERT_TRUE(kc.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return handled == kRows; }, 30s));
  // lag and the largest age over the partitions, at `now_ms`
  auto figures = [&](int64_t now_ms) {
    std::lock_guard<std::mutex> lock(mu);
    int64_t lag = 0;
    double age = 0;
    size_t open = 0;
    for (const auto& p : last) {
      lag += p.lag;
      open += p.open;
      age = std::max(age, OldestUnprocessedAgeSeconds(p, now_ms));
    }
    return std::make_tuple(lag, age, open, last.size());
  };
  ASSERT_TRUE(WaitFor([&] { return std::get<0>(figures(NowMicros() / 1000)) == 0; }, 30s));

  kc.Pause();
  // Pause() takes effect on the polling thread's next round (its poll waits
  // up to 20 ms): cells written before that could still be fetched, and be in
  // hand, abandoned. Write once fetching is paused.
  ASSERT_TRUE(WaitFor(
      [&] {
        return MetricValue(metrics.Render(), "cellar_consumer_fetch_paused",
                           {{"group", c->prefix + ".kc"}}) == 1;
      },
      10s));
  constexpr int64_t kLater = 9;
  PutVersion(*c->store, NewRows(kLater), "BASE", 1, body);
  const MicrosSinceEpoch written = NowMicros();
  std::tuple<int64_t, double, size_t, size_t> f;
  // Lag counts offsets: the later cells, and the commit markers of the
  // exactly-once relay's transactions (at most one per transaction and
  // partition, and the one each partition ended with before).
  const int64_t max_lag = 2 * kLater + static_cast<int64_t>(kPartitions);
  EXPECT_TRUE(WaitFor(
      [&] {
        f = figures(NowMicros() / 1000);
        return std::get<0>(f) >= kLater && std::get<0>(f) <= max_lag;
      },
      30s))
      << "lag " << std::get<0>(f) << " over " << std::get<3>(f) << " partitions";
  EXPECT_EQ(std::get<2>(f), 0u) << "events in hand after Pause()";
  const MicrosSinceEpoch before = NowMicros();
  EXPECT_TRUE(WaitFor(
      [&] {
        f = figures(NowMicros() / 1000);
        return std::get<1>(f) >= static_cast<double>(before - written) / 1e6 && std::get<1>(f) > 0;
      },
      30s))
      << "age " << std::get<1>(f);
  EXPECT_EQ(handled, kRows);
  kc.Stop(1000);
}

}  // namespace
}  // namespace cellar::trigtest
