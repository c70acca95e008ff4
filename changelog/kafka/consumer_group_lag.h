// How far a consumer group is behind on some topics, read from Kafka alone
// (committed offsets and partition ends): works without the consumers running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

struct PartitionLag {
  std::string topic;
  int32_t partition = 0;
  int64_t committed = -1;  // next offset the group reads; -1: nothing committed
  int64_t end = 0;         // partition end (high watermark)
  // Offsets the group has not committed past; 0 when none of them holds a
  // record a read_committed consumer gets (only transaction markers or
  // aborted records: the exactly-once relay ends each batch with a marker).
  int64_t lag = 0;
  // With `with_oldest`: the timestamp (ms since the epoch; the relay stamps
  // a cell's created_at) of the first record the group has not committed
  // past, when lag > 0; 0 when caught up or it could not be read.
  int64_t oldest_timestamp_ms = 0;
};

struct GroupLag {
  std::vector<PartitionLag> partitions;  // every partition of every existing topic
  int64_t total = 0;
  // Seconds from the oldest partitions' oldest_timestamp_ms to `now` (the
  // consumer's IteratorAge); 0 when caught up or without `with_oldest`.
  double OldestAgeSeconds(int64_t now_ms) const;
};

// Topics that do not exist are skipped. Unavailable when Kafka does not answer.
// Reads each lagging partition from its committed offset (one short read) to
// tell records from trailing transaction markers; with `with_oldest` keeps
// that record's timestamp (a record that cannot be read within a few seconds
// leaves oldest_timestamp_ms 0).
Result<GroupLag> ReadGroupLag(const ClusterConfig& config, const std::string& group,
                              const std::vector<std::string>& topics, bool with_oldest = false);

// One record position.
struct RecordPosition {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

// ReadRecordTimestamps' entry for a position at or after which a
// read_committed reader finds no record (the partition end, or only
// transaction markers and aborted records up to it).
constexpr int64_t kNoVisibleRecord = -1;

// The timestamps (ms since the epoch) of the records at `positions`, in
// their order, read without a consumer group as a read_committed consumer
// (a record no longer stored, or a marker, answers with the next record's).
// An entry is kNoVisibleRecord when the reader reached the end of what it
// can see first, 0 when its record could not be read within timeout_ms. Unavailable
// or InvalidArgument when no consumer can be made or assigned.
Result<std::vector<int64_t>> ReadRecordTimestamps(const KafkaConfig& kafka,
                                                  const std::vector<RecordPosition>& positions,
                                                  int timeout_ms);

// OK when a broker answers a metadata request within timeout_ms; Unavailable
// (with librdkafka's reason) otherwise; InvalidArgument when no broker is configured.
Status ProbeKafka(const ClusterConfig& config, int timeout_ms);

// Records currently stored in `topic` (sum over partitions of end - start); 0 if absent.
Result<int64_t> TopicRecordCount(const ClusterConfig& config, const std::string& topic);

}  // namespace cellar
