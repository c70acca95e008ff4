// ChangeLogConsumer: reads CellEvents from the change-log topics with
// librdkafka's KafkaConsumer.
//
// Two modes:
//  - group_id set: joins that consumer group (partitions shared with other
//    members); offsets are committed only by Commit() (auto commit is off), so
//    a crash re-delivers everything after the last commit.
//  - group_id empty: reads every partition of the topics directly (no group),
//    from the beginning or the end; nothing is committed. For `cellar log
//    tail` and tests.
// Threading: one thread at a time.
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "changelog/cell_event.h"
#include "config/cluster_config.h"

namespace cellar {

struct ConsumerOptions {
  std::string group_id;           // empty: read all partitions without a group
  bool from_beginning = true;     // where to start without a committed offset
  int session_timeout_ms = 6000;  // short: the local broker rebalances faster
  std::string client_id = "cellar";
  // Further topics to read besides the datastores' change logs (e.g. a trigger's
  // retry topic). Their records are returned by PollRecord() only.
  std::vector<std::string> extra_topics;
  // Called on partition assignment/revocation (grouped mode). Not owned; must
  // outlive the consumer. When set it must (un)assign, as librdkafka requires.
  RdKafka::RebalanceCb* rebalance_cb = nullptr;
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
  ~ChangeLogConsumer();

  // The next event, or nullopt if none arrived within timeout_ms. A record that
  // is not a valid event is InvalidArgument naming its topic/partition/offset
  // (the consumer has moved past it). Unavailable for broker errors that persist.
  Result<std::optional<ConsumedEvent>> Poll(int timeout_ms);

  // The next record of any subscribed topic, undecoded; nullopt on timeout.
  Result<std::optional<ConsumedRecord>> PollRecord(int timeout_ms);

  // Commits "everything up to and including `offset`" for one partition (synchronous).
  Status Commit(const std::string& topic, int32_t partition, int64_t offset);

  // Leaves the group (if any) and closes. Idempotent.
  void Close();

  RdKafka::KafkaConsumer* raw() { return consumer_.get(); }

 private:
  explicit ChangeLogConsumer(std::unique_ptr<RdKafka::KafkaConsumer> c) : consumer_(std::move(c)) {}
  std::unique_ptr<RdKafka::KafkaConsumer> consumer_;
  bool closed_ = false;
};

}  // namespace cellar
