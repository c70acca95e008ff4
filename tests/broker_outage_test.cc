// A broker down for a minute mid-run (issue #48, "Bad input and faults"): the
// only broker's JVM is stopped for 60 s and started again on the same ports
// and data while cells are written throughout. cellar-relay, cellar-indexer
// and cellar-trigger keep running and resume by themselves: every cell
// reaches the change log exactly once for a read_committed reader (the
// relay's exactly-once mode doubles nothing), the webhook gets every cell
// and the index holds every trip.
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "changelog/cell_event.h"
#include "gtest/gtest.h"
#include "testing/plain_topic_reader.h"
#include "testing/wait_for.h"
#include "testing/webhook_sink.h"
#include "tests/kafka_processes.h"

namespace cellar::kafkaproc {
namespace {

using namespace std::chrono_literals;
using testing::WaitFor;

constexpr auto kOutage = 60s;
constexpr auto kWriteInterval = 20ms;  // ~50 trips/s, as a service's steady traffic
constexpr int kDrivers = 8;            // ~450 trips each: one index page (limit 1000)

// Writes one trip (BASE, ref_key 1) every kWriteInterval until destroyed,
// cycling over kDrivers drivers, and remembers the rows written.
class TripWriter {
 public:
  explicit TripWriter(CellStore* store) : store_(store) {
    for (int i = 0; i < kDrivers; ++i) drivers_.push_back(Uuid::Random());
    thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  }
  ~TripWriter() { Stop(); }
  void Stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  // driver -> rows written for it.
  std::map<std::string, std::set<std::string>> Rows() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  size_t failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }
  std::string first_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  void Run(const std::stop_token& stop) {
    auto next = std::chrono::steady_clock::now();
    for (int i = 0; !stop.stop_requested(); ++i) {
      std::this_thread::sleep_until(next);  // pacing, not a wait for a condition
      next += kWriteInterval;
      const Uuid& driver = drivers_[static_cast<size_t>(i % kDrivers)];
      const Uuid row = Uuid::Random();
      auto put = store_->Put("trips", CellWrite{row, "BASE", 1, TripBody(driver, i % 60)});
      std::lock_guard<std::mutex> lock(mu_);
      if (put.ok()) {
        rows_[driver.ToString()].insert(row.ToString());
        ++count_;
      } else if (failures_++ == 0) {
        first_error_ = put.status().ToString();
      }
    }
  }

  CellStore* store_;
  std::vector<Uuid> drivers_;
  mutable std::mutex mu_;
  std::map<std::string, std::set<std::string>> rows_;
  size_t count_ = 0, failures_ = 0;
  std::string first_error_;
  std::jthread thread_;
};

TEST(BrokerOutageTest, AMinuteWithoutTheBrokerEveryProcessResumesNothingLostNothingDoubled) {
  auto c = MakeCluster("bo_minute", Env().broker->bootstrap(), {});
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->config.relay.exactly_once) << "exactly-once is the default relay mode";

  std::mutex mu;
  std::map<std::string, int> deliveries;  // row key -> webhook calls answered 200
  auto sink = testing::WebhookSink::Start([&](const std::string&, const std::string& body) {
    auto ev = DecodeCellEvent(body);
    if (!ev.ok()) return 422;
    std::lock_guard<std::mutex> lock(mu);
    ++deliveries[ev->cell.row_key.ToString()];
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  auto delivered = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return deliveries.size();
  };
  Workers w(*c, TriggersFile(c->prefix, (*sink)->Url("/hook")));
  for (auto& [name, p] : w.All()) ASSERT_TRUE(p->running()) << name;

  struct BrokerUp {  // brings the broker back even if an assertion fails
    ~BrokerUp() { Env().broker->SetDown(false); }
  } broker_up;
  TripWriter writer(c->store.get());
  ASSERT_TRUE(WaitFor([&] { return delivered() >= 50; }, 60s, 50ms))
      << "the pipeline delivered " << delivered() << " before the outage\n"
      << w.Logs();

  Env().broker->SetDown(true);
  const size_t written_before = writer.count();
  const size_t delivered_before = delivered();
  // The outage itself: a fixed minute of writes with no broker.
  std::this_thread::sleep_for(kOutage);
  const size_t written_during = writer.count() - written_before;
  const size_t delivered_during = delivered() - delivered_before;
  for (auto& [name, p] : w.All())
    ASSERT_TRUE(p->running()) << name << " exited during the outage:\n" << p->Log();
  Env().broker->SetDown(false);
  const auto up_at = std::chrono::steady_clock::now();
  EXPECT_GT(written_during, 1000u) << "writes did not proceed while Kafka was down";
  // Writes go on for a while after the broker is back, then stop.
  const size_t at_return = writer.count();
  ASSERT_TRUE(WaitFor([&] { return writer.count() >= at_return + 100; }, 30s));
  writer.Stop();
  EXPECT_EQ(writer.failures(), 0u) << writer.first_error();
  const auto by_driver = writer.Rows();
  std::set<std::string> rows;
  for (const auto& [driver, r] : by_driver) rows.insert(r.begin(), r.end());

  // The webhook got every trip (relay -> Kafka -> cellar-trigger).
  size_t missing_hooks = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        missing_hooks = 0;
        for (const auto& r : rows) missing_hooks += deliveries.count(r) ? 0 : 1;
        return missing_hooks == 0;
      },
      180s, 100ms))
      << missing_hooks << " of " << rows.size() << " trips never reached the webhook\n"
      << w.Logs();
  const auto caught_up_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - up_at).count();

  // The index has every trip of every driver (relay -> Kafka -> cellar-indexer).
  for (const auto& [driver, want] : by_driver) ExpectIndexedTrips(*c, w, driver, want, 120s);

  // The topic, as any read_committed client reads it: every trip exactly once.
  auto topic = testing::ReadTopic(Env().broker->bootstrap(),
                                  ChangeLogTopic(c->config.kafka, "trips"), kPartitions);
  ASSERT_TRUE(topic.ok()) << topic.status().ToString();
  std::map<std::string, int> copies;
  for (const testing::TopicRecord& r : topic->records) {
    auto ev = DecodeCellEvent(r.value);
    ASSERT_TRUE(ev.ok()) << ev.status().ToString();
    ++copies[ev->cell.row_key.ToString()];
  }
  size_t lost = 0, doubled = 0;
  for (const auto& r : rows) {
    auto it = copies.find(r);
    if (it == copies.end())
      ++lost;
    else if (it->second > 1)
      ++doubled;
  }
  EXPECT_EQ(lost, 0u) << "trips not in the change log";
  EXPECT_EQ(doubled, 0u) << "trips in the change log more than once";
  EXPECT_EQ(copies.size(), rows.size()) << "records of trips nobody wrote";

  size_t hook_calls = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [r, n] : deliveries) hook_calls += static_cast<size_t>(n);
  }
  std::cout << "[ broker-outage ] " << rows.size() << " trips, " << written_during
            << " written during the " << kOutage.count() << " s outage (" << delivered_during
            << " delivered meanwhile); webhook caught up " << caught_up_s
            << " s after the broker returned; " << hook_calls - rows.size()
            << " webhook re-deliveries (at least once), " << doubled << " doubled in the topic\n";
  for (auto& [name, p] : w.All()) EXPECT_EQ(p->Terminate(20s), 0) << name << ":\n" << p->Log();
}

}  // namespace
}  // namespace cellar::kafkaproc
