// How far a consumer group is behind on some topics, read from Kafka alone
// (committed offsets and partition ends): works without the consumers running.
#pragma once

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
  int64_t lag = 0;         // records the group has not committed past
};

struct GroupLag {
  std::vector<PartitionLag> partitions;  // every partition of every existing topic
  int64_t total = 0;
};

// Topics that do not exist are skipped. Unavailable when Kafka does not answer.
Result<GroupLag> ReadGroupLag(const ClusterConfig& config, const std::string& group,
                              const std::vector<std::string>& topics);

// OK when a broker answers a metadata request within timeout_ms; Unavailable
// (with librdkafka's reason) otherwise; InvalidArgument when no broker is configured.
Status ProbeKafka(const ClusterConfig& config, int timeout_ms);

// Records currently stored in `topic` (sum over partitions of end - start); 0 if absent.
Result<int64_t> TopicRecordCount(const ClusterConfig& config, const std::string& topic);

}  // namespace cellar
