// ChangeLogConsumer: reads CellEvents from the change-log topics with
// librdkafka's KafkaConsumer. No librdkafka type appears in this header: the
// modules above changelog/ reach Kafka only through it and its siblings.
//
// Two modes:
//  - group_id set: joins that consumer group (partitions shared with other
//    members); offsets are committed only by Commit() (auto commit is off), so
//    a crash re-delivers everything after the last commit.
//  - group_id empty: reads every partition of the topics directly (no group),
//    from the beginning or the end; nothing is committed. For `cellar log
//    tail` and tests.
// Threading: one thread at a time (on_rebalance runs on that thread, inside
// Poll()/PollRecord()/Close()).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "changelog/cell_event.h"
#include "config/cluster_config.h"

namespace cellar {

// One partition of one topic.
struct TopicPartitionId {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartitionId&) const = default;
};

enum class RebalanceKind { kAssigned, kRevoked };

// Records of one partition a group member never got: [first, end).
struct SkippedRecords {
  TopicPartitionId partition;
  int64_t first = 0;
  int64_t end = 0;
  int64_t count() const { return end - first; }
};

struct ConsumerOptions {
  std::string group_id;           // empty: read all partitions without a group
  bool from_beginning = true;     // where to start without a committed offset
  int session_timeout_ms = 6000;  // short: the local broker rebalances faster
  std::string client_id = "cellar";
  // Further topics to read besides the datastores' change logs (e.g. a trigger's
  // retry topic). Their records are returned by PollRecord() only.
  std::vector<std::string> extra_topics;
  // Grouped mode: called when the group assigns partitions to this member
  // (after they are assigned, so Pause() applies to them) or revokes them
  // (before they are released, so Commit() can still record finished work).
  // The consumer does the (un)assignment itself. May call Commit(), Pause(),
  // Resume(), Assignment() and KnownEnd(). An exception it throws is caught
  // and logged.
  std::function<void(RebalanceKind, const std::vector<TopicPartitionId>&)> on_rebalance;
  // Grouped mode: called when a partition's next record is past the offset
  // this member was to read next (the group's committed offset, or the record
  // after the last one returned): the records in between were deleted by
  // retention before they were read, and librdkafka's auto.offset.reset moved
  // past them without an error (internal/read_positions.h). The records are
  // gone from Kafka; the host log still has the cells. Runs on the polling
  // thread inside Poll()/PollRecord(), before the record is returned. May be
  // empty.
  std::function<void(const SkippedRecords&)> on_skipped;
};

// One record as read from Kafka, undecoded.
struct ConsumedRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
  int64_t broker_timestamp_ms = 0;
};

struct ConsumedEvent {
  CellEvent event;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t broker_timestamp_ms = 0;  // the record's timestamp
};

class ChangeLogConsumer {
 public:
  // Subscribes to the change-log topic of each datastore. InvalidArgument for an
  // unknown datastore or a bad Kafka setting.
  static Result<std::unique_ptr<ChangeLogConsumer>> Create(
      const ClusterConfig& config, const std::vector<std::string>& datastores,
      const ConsumerOptions& options);
  ~ChangeLogConsumer();  // Close()

  // The next event, or nullopt if none arrived within timeout_ms. A record that
  // is not a valid event is InvalidArgument naming its topic/partition/offset
  // (the consumer has moved past it). Unavailable for broker errors that persist.
  Result<std::optional<ConsumedEvent>> Poll(int timeout_ms);

  // The next record of any subscribed topic, undecoded; nullopt on timeout.
  Result<std::optional<ConsumedRecord>> PollRecord(int timeout_ms);

  // One partition's finished prefix: everything up to and including `offset`.
  struct CommitPosition {
    TopicPartitionId partition;
    int64_t offset = -1;
  };
  // Commits every position in one OffsetCommit request (synchronous): a
  // group's commit round costs the broker one request and one append to its
  // offsets topic, not one per partition. Returns one status per position,
  // in order: Ok, or Unavailable when Kafka refused that partition or did not
  // answer (then every position is Unavailable).
  std::vector<Status> Commit(const std::vector<CommitPosition>& positions);

  // Stops fetching from these (assigned) partitions, or starts again. Records
  // already returned are unaffected; after Resume() the partition goes on
  // after the last record Poll returned. Unavailable on a Kafka error.
  Status Pause(const std::vector<TopicPartitionId>& partitions);
  Status Resume(const std::vector<TopicPartitionId>& partitions);

  // The partitions this member reads now. Unavailable on a Kafka error.
  Result<std::vector<TopicPartitionId>> Assignment();

  // The partition's end (offset of its next record) as the broker last
  // reported it with fetched records: no request is sent. NotFound before the
  // first fetch response of that partition.
  Result<int64_t> KnownEnd(const TopicPartitionId& partition);
  // The partition's end asked from the broker (one request, up to
  // timeout_ms): for paused partitions, whose KnownEnd() no fetch refreshes.
  // Unavailable when the broker does not answer.
  Result<int64_t> QueryEnd(const TopicPartitionId& partition, int timeout_ms);

  // Leaves the group (if any) and closes. Idempotent.
  void Close();

 private:
  struct Impl;
  explicit ChangeLogConsumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
