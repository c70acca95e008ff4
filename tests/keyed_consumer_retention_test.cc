// A group that fell behind its topic's retention (changelog/keyed_consumer.h,
// kafka/internal/read_positions.h): the records deleted before the group read
// them are counted (cellar_consumer_skipped_records_total) and logged, and
// everything else is still handed on. The records are deleted with Kafka's
// DeleteRecords, which moves the partition's log start as retention does when
// it deletes old segments. Part of the trigger_test binary (its environment).
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>

#include "base/time.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_probe.h"
#include "changelog/kafka/kafka_producer.h"
#include "changelog/keyed_consumer.h"
#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "tests/trigger_test_util.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;

// Writes change-log events straight to partition 0 of the trips topic (no
// relay: the test decides their sizes), numbered by added_id from 1.
class EventWriter {
 public:
  // With a transactional_id, WriteBetweenAbortedTransactions only.
  explicit EventWriter(const ClusterConfig& config, std::string transactional_id = "")
      : config_(config),
        topic_(ChangeLogTopic(config.kafka, "trips")),
        transactional_id_(std::move(transactional_id)) {}

  ::testing::AssertionResult Write(int count, size_t body_bytes) {
    if (auto r = Open(); !r) return r;
    for (int i = 0; i < count; ++i) {
      if (auto r = Produce(++last_added_id_, body_bytes); !r) return r;
      // One record per request: one offset per event, whatever the batching.
      if (Status f = producer_->Flush(10000); !f.ok())
        return ::testing::AssertionFailure() << f.ToString();
    }
    return ::testing::AssertionSuccess();
  }

  // `rounds` committed events, each followed by an aborted transaction of two
  // decoy events (added_ids from 1,000,000): a read_committed reader meets a
  // hole of four offsets after each event (its commit marker, the decoys,
  // their abort marker), none of them lost.
  ::testing::AssertionResult WriteBetweenAbortedTransactions(int rounds) {
    if (auto r = Open(); !r) return r;
    auto failed = [](const Status& s) { return ::testing::AssertionFailure() << s.ToString(); };
    for (int i = 0; i < rounds; ++i) {
      if (Status s = producer_->BeginTransaction(); !s.ok()) return failed(s);
      if (auto r = Produce(++last_added_id_, 100); !r) return r;
      if (Status s = producer_->CommitTransaction(10000); !s.ok()) return failed(s);
      if (Status s = producer_->BeginTransaction(); !s.ok()) return failed(s);
      for (int d = 0; d < 2; ++d)
        if (auto r = Produce(1000000 + 2 * i + d, 100); !r) return r;
      // Delivered before the abort, so that the decoys take their offsets.
      if (Status f = producer_->Flush(10000); !f.ok()) return failed(f);
      if (Status s = producer_->AbortTransaction(10000); !s.ok()) return failed(s);
    }
    return ::testing::AssertionSuccess();
  }
  uint64_t last_added_id() const { return last_added_id_; }

 private:
  ::testing::AssertionResult Open() {
    if (producer_) return ::testing::AssertionSuccess();
    ProducerOptions options;
    options.settings = {{"linger.ms", "0"}};
    if (!transactional_id_.empty()) options.settings["transactional.id"] = transactional_id_;
    auto p = KafkaProducer::Create(config_.kafka, options);
    if (!p.ok()) return ::testing::AssertionFailure() << p.status().ToString();
    producer_ = std::move(p).value();
    if (!transactional_id_.empty())
      if (Status s = producer_->InitTransactions(30000); !s.ok())
        return ::testing::AssertionFailure() << s.ToString();
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult Produce(uint64_t added_id, size_t body_bytes) {
    Cell cell;
    cell.row_key = Uuid::Random();
    cell.column = "BASE";
    cell.ref_key = 1;
    cell.shard = 0;  // partition 0 (shard % partitions)
    cell.added_id = added_id;
    cell.created_at = NowMicros();
    cell.body = {{"pad", std::string(body_bytes, 'x')}};
    Status st = producer_->Produce(
        topic_, ChangeLogPartition(config_.kafka, cell.shard), cell.row_key.ToString(),
        EncodeCellEvent("trips", cell, int64_t{1} << 30), cell.created_at / 1000);
    if (!st.ok()) return ::testing::AssertionFailure() << st.ToString();
    return ::testing::AssertionSuccess();
  }

  const ClusterConfig& config_;
  const std::string topic_;
  const std::string transactional_id_;
  std::unique_ptr<KafkaProducer> producer_;
  uint64_t last_added_id_ = 0;
};

struct Handled {
  std::mutex mu;
  std::set<uint64_t> added_ids;
  std::atomic<uint64_t> last{0};
};

std::unique_ptr<KeyedConsumer> StartMember(Cluster& c, MetricsRegistry* metrics, Handled* handled) {
  KeyedConsumerOptions o;
  o.group_id = c.prefix + ".retention";
  o.client_id = "keyed-consumer-retention-test";
  o.datastores = {"trips"};
  o.concurrency = 2;
  o.metrics = metrics;
  KeyedConsumerCallbacks cb;
  cb.handle = [handled](KeyedEvent& e) {
    std::lock_guard<std::mutex> lock(handled->mu);
    handled->added_ids.insert(e.event.cell.added_id);
    handled->last = std::max<uint64_t>(handled->last, e.event.cell.added_id);
    return Disposition::kDone;
  };
  auto member = std::make_unique<KeyedConsumer>(c.store.get(), o, cb);
  if (!member->Start().ok()) return nullptr;
  return member;
}

TEST(KeyedConsumerRetentionTest, RecordsDeletedBeforeTheGroupReadThemAreCountedAndTheRestHandled) {
  auto c = MakeCluster("kc_retention", Broker());
  ASSERT_TRUE(c);
  MetricsRegistry metrics;
  const std::string group = c->prefix + ".retention";
  auto skipped = [&] {
    return ::cellar::testing::MetricValue(metrics.Render(), "cellar_consumer_skipped_records_total",
                                          {{"group", group}});
  };
  EventWriter writer(c->config);

  // The group reads and commits the first event, then stops.
  ASSERT_TRUE(writer.Write(1, 100));
  Handled first;
  {
    auto member = StartMember(*c, &metrics, &first);
    ASSERT_TRUE(member);
    ASSERT_TRUE(WaitFor([&] { return first.last == 1; }, 30s));
    member->Stop(5000);  // commits what was handled
  }
  EXPECT_EQ(skipped(), 0);

  // While it is away, more events arrive and the oldest are deleted, among
  // them the one the group was to read next (offset 1, added_id 2).
  constexpr int kLate = 60;
  constexpr int64_t kDeletedBefore = 25;  // offsets 0..24: added_ids 1..25
  ASSERT_TRUE(writer.Write(kLate, 1024));
  const Status deleted =
      Broker().DeleteRecords(ChangeLogTopic(c->config.kafka, "trips"), 0, kDeletedBefore);
  ASSERT_TRUE(deleted.ok()) << deleted.ToString();

  Handled second;
  auto member = StartMember(*c, &metrics, &second);
  ASSERT_TRUE(member);
  ASSERT_TRUE(WaitFor([&] { return second.last == writer.last_added_id(); }, 60s))
      << "the newest event never arrived";
  member->Stop(5000);
  std::lock_guard<std::mutex> lock(second.mu);
  // What the group got is a contiguous run up to the newest; everything before
  // it that it never got is counted, and nothing else is.
  ASSERT_FALSE(second.added_ids.empty());
  const uint64_t first_got = *second.added_ids.begin();
  EXPECT_EQ(second.added_ids.size(), writer.last_added_id() - first_got + 1);
  EXPECT_EQ(first_got, static_cast<uint64_t>(kDeletedBefore) + 1)
      << "the group did not resume at the new log start";
  EXPECT_EQ(skipped(), static_cast<double>(first_got - 2))
      << "events 2.." << first_got - 1 << " were never handed on";
}

// The exactly-once relay's aborted transactions, and transactions of two
// producers (the relay's alternate) whose markers interleave, leave holes of
// more than one offset in what a read_committed group reads. Such a hole is
// lost only below the partition's log start, which each fetch response
// carries: asking the broker for it instead blocked the polling thread for
// every hole (the query waits behind the consumer's own long-polling fetch,
// up to 500 ms), and a group reading a log of many holes fell minutes behind.
TEST(KeyedConsumerRetentionTest, HolesLeftByAbortedTransactionsAreNotLostAndDoNotStallTheGroup) {
  auto c = MakeCluster("kc_holes", Broker());
  ASSERT_TRUE(c);
  MetricsRegistry metrics;
  const std::string group = c->prefix + ".retention";
  constexpr int kRounds = 40;
  EventWriter writer(c->config, c->prefix + ".aborting-writer");
  ASSERT_TRUE(writer.WriteBetweenAbortedTransactions(kRounds));

  Handled handled;
  const auto t0 = std::chrono::steady_clock::now();
  auto member = StartMember(*c, &metrics, &handled);
  ASSERT_TRUE(member);
  ASSERT_TRUE(WaitFor([&] { return handled.last == writer.last_added_id(); }, 60s))
      << "the last event never arrived";
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  member->Stop(5000);
  std::lock_guard<std::mutex> lock(handled.mu);
  EXPECT_EQ(handled.added_ids.size(), static_cast<size_t>(kRounds)) << "decoys were handed on";
  EXPECT_EQ(::cellar::testing::MetricValue(
                metrics.Render(), "cellar_consumer_skipped_records_total", {{"group", group}}),
            0);
  // Joining the group and the first fetch take about a second; a broker round
  // trip per hole took 40 x ~0.5 s.
  EXPECT_LT(ms, 8000) << kRounds << " events between aborted transactions took " << ms << " ms";
  std::cout << "[ consumer ] " << kRounds << " events between aborted transactions read in " << ms
            << " ms\n";
}

}  // namespace
}  // namespace cellar::trigtest
