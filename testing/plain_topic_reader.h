// ReadTopic: every record of a Kafka topic from the beginning, read with a
// plain librdkafka consumer (isolation.level=read_committed, partitions
// assigned, no consumer group) and none of Cellar's consumer code, as any
// Kafka client would see the change log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace cellar::testing {

struct TopicRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
};

struct TopicContents {
  // In offset order within each partition (partitions interleave).
  std::vector<TopicRecord> records;
  // Per partition 0..partitions-1, the offset its log starts at (the low
  // watermark): above 0 once the broker deleted older records (retention).
  std::vector<int64_t> log_start;
};

// The records of partitions 0..partitions-1 of `topic` below each partition's
// high watermark at the time of the call, in offset order per partition, and
// where each partition's log starts. Unavailable when the broker cannot be
// reached or the read does not finish within `timeout_ms`.
Result<TopicContents> ReadTopic(const std::string& brokers, const std::string& topic,
                                int partitions, int timeout_ms = 30000);

}  // namespace cellar::testing
