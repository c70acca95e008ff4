// #14 part 5, the pipeline side of a host outage: one MariaDB host is killed
// while writers run and later restarted; the relay and the index worker keep
// running (the same in-process objects, never restarted). While the host is
// down the relay goes on publishing the other host's log; once it is back,
// every acknowledged write is readable with its body, the relay's checkpoints
// reach every host head, the index worker's group has no lag and the index
// equals a brute-force computation over the cells.
//
// Two private MariaDB servers: the binary's (host 1, shards 0-3) and one
// started here (host 2, shards 4-7), the local broker, exactly-once relay.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cells/shard_map.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar::idxtest {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Writer threads putting new trips (one new row per put) until stopped,
// recording every acknowledged put and counting Unavailable answers per host.
class TripWriters {
 public:
  TripWriters(CellStore* store, const std::vector<Uuid>& drivers, const std::vector<Uuid>& cities,
              int threads)
      : store_(store), drivers_(drivers), cities_(cities) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { Run(t); });
  }
  ~TripWriters() { Stop(); }

  void Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  // Acknowledged puts on shards of the first / second half.
  uint64_t acked_on(int host) const { return acked_on_[host]; }
  uint64_t unavailable_on(int host) const { return unavailable_on_[host]; }
  uint64_t other_errors() const { return other_errors_; }
  std::string first_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }
  std::map<Uuid, nlohmann::json> Acked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }

 private:
  void Run(int thread_index) {
    std::mt19937_64 rng(std::random_device{}() + thread_index);
    while (!stop_) {
      const Uuid row = Uuid::Random();
      const int host = ShardForRow(row, kShards) < kShards / 2 ? 0 : 1;
      const nlohmann::json body = TripBody(RandomTrip(rng, drivers_, cities_));
      CellWrite w;
      w.row_key = row;
      w.column = "BASE";
      w.ref_key = 1;
      w.body = body;
      Result<PutResult> r = store_->Put("trips", w);
      if (r.ok()) {
        acked_on_[host]++;
        std::lock_guard<std::mutex> lock(mu_);
        acked_.emplace(row, body);
      } else if (r.status().code() == StatusCode::kUnavailable) {
        unavailable_on_[host]++;
        // Back off as the client does instead of spinning on a refused host.
        std::this_thread::sleep_for(milliseconds(20));
      } else {
        other_errors_++;
        std::lock_guard<std::mutex> lock(mu_);
        if (first_error_.empty()) first_error_ = r.status().ToString();
      }
    }
  }

  CellStore* store_;
  std::vector<Uuid> drivers_, cities_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_on_[2] = {0, 0}, unavailable_on_[2] = {0, 0};
  std::atomic<uint64_t> other_errors_{0};
  mutable std::mutex mu_;
  std::map<Uuid, nlohmann::json> acked_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

// The relay checkpoint of (host name, "trips"), or -1 when it cannot be read.
int64_t TripsCheckpoint(CellStore& store, const std::string& host) {
  for (const auto& s : ReadRelayStatus(store))
    if (s.host == host && s.datastore == "trips" && s.error.empty())
      return static_cast<int64_t>(s.checkpoint);
  return -1;
}

std::string RelayStatusText(CellStore& store) {
  std::string out;
  for (const auto& s : ReadRelayStatus(store))
    out += "\n  " + s.host + "/" + s.datastore + " checkpoint " + std::to_string(s.checkpoint) +
           " head " + std::to_string(s.head) + " lag " + std::to_string(s.lag) +
           (s.error.empty() ? "" : " error: " + s.error);
  return out;
}

TEST(HostReturnTest, RelayAndIndexWorkerCatchUpAfterAHostReturnsWithoutARestart) {
  std::unique_ptr<testing::PrivateMariaDb> second = testing::PrivateMariaDb::Start("db2");
  auto c = MakeCluster("host_return", {&Db(), second.get()});
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->config.relay.exactly_once);
  const std::string first_host = c->config.mysql.hosts[0].name;
  ASSERT_EQ(second->port(), c->config.HostForShard(kShards / 2).port);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});
  Relay* const relay = c->relay.get();
  IndexWorker* const worker = c->worker.get();

  const std::vector<Uuid> drivers = RandomUuids(10), cities = RandomUuids(4);
  TripWriters writers(c->store.get(), drivers, cities, 4);
  ASSERT_TRUE(
      WaitFor([&] { return writers.acked_on(0) > 100 && writers.acked_on(1) > 100; }, seconds(30)));

  second->Kill();
  ASSERT_TRUE(WaitFor([&] { return writers.unavailable_on(1) > 10; }, seconds(30)))
      << "the second host's puts did not turn Unavailable";
  // The first host's stream goes on: cells written after the kill reach Kafka.
  const uint64_t acked_before = writers.acked_on(0);
  const int64_t checkpoint_before = TripsCheckpoint(*c->store, first_host);
  ASSERT_GE(checkpoint_before, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        return writers.acked_on(0) > acked_before + 200 &&
               TripsCheckpoint(*c->store, first_host) > checkpoint_before + 100;
      },
      seconds(30)))
      << "the relay stopped publishing the first host while the second was down:"
      << RelayStatusText(*c->store);

  second->Restart();
  const uint64_t acked_on_second = writers.acked_on(1);
  ASSERT_TRUE(WaitFor([&] { return writers.acked_on(1) > acked_on_second + 100; }, seconds(30)))
      << "the store did not write to the second host again after its restart";
  writers.Stop();
  EXPECT_EQ(0u, writers.other_errors()) << writers.first_error();

  // The same relay and worker objects catch up.
  ASSERT_EQ(relay, c->relay.get());
  ASSERT_EQ(worker, c->worker.get());
  std::string problems;
  EXPECT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def);
        return problems.empty();
      },
      seconds(90), milliseconds(200)))
      << "relay:" << RelayStatusText(*c->store) << "\nworker lag " << c->WorkerLag() << "; "
      << problems;

  // Every acknowledged write is there with its body, and the index answers
  // what the cells call for.
  const auto acked = writers.Acked();
  const auto latest = LatestCells(*c->store, "trips");
  size_t missing = 0;
  for (const auto& [row, body] : acked) {
    auto it = latest.find({row, "BASE"});
    if (it == latest.end()) {
      if (++missing <= 5) ADD_FAILURE() << "acknowledged put of " << row.ToString() << " missing";
      continue;
    }
    EXPECT_EQ(body, it->second.body) << row.ToString();
  }
  EXPECT_EQ(0u, missing);
  const Model model(def, latest);
  IndexReader reader(c->store.get(), {def});
  size_t total = 0;
  for (const Uuid& d : drivers) {
    IndexQuery q;
    q.index = def.table;
    q.shard_value = d.ToString();
    q.limit = 500;
    auto got = QueryAll(reader, q);
    total += got.size();
    EXPECT_EQ("", Diff(model.Answer(q), got)) << "driver " << d.ToString();
  }
  EXPECT_EQ(model.size(), total);
  const RelayStats stats = relay->stats();
  std::printf(
      "[host return] %zu acknowledged puts (%llu on the second host, %llu Unavailable while it "
      "was down); relay published %llu, rolled back %llu fenced batches; %zu index entries\n",
      acked.size(), static_cast<unsigned long long>(writers.acked_on(1)),
      static_cast<unsigned long long>(writers.unavailable_on(1)),
      static_cast<unsigned long long>(stats.published),
      static_cast<unsigned long long>(stats.failed_fenced_batches), total);
  c.reset();  // relay, worker and store before the server they talk to
}

}  // namespace
}  // namespace cellar::idxtest
