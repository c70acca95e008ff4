// Operator views of a trigger that need no running worker: its consumer
// group's lag, and its dead-letter topic (list, and retry by copying records
// to the trigger's retry topic, which the running trigger consumes).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "config/cluster_config.h"
#include "triggers/dead_letter.h"

namespace cellar {

// Per partition: committed offset, end and lag (changelog/consumer_group_lag.h).
using TriggerPartitionLag = PartitionLag;

struct TriggerLagReport {
  std::vector<TriggerPartitionLag> partitions;
  int64_t total_lag = 0;
  // Now minus the timestamp of the oldest record not committed past (the
  // cell's created_at on the change log; when it was set aside on the retry
  // topic); 0 when caught up (ReadTriggerGroupLag).
  double oldest_unprocessed_age_seconds = 0;
  int64_t dead_letters = 0;  // records in the DLQ topic
};

// Unavailable when Kafka does not answer.
Result<TriggerLagReport> ReadTriggerLag(const ClusterConfig& config, const std::string& datastore,
                                        const std::string& trigger);

// Every record the trigger's DLQ holds when called (records set aside meanwhile
// are not waited for; gives up after idle_ms without a record).
Result<std::vector<DeadLetter>> ListDeadLetters(const ClusterConfig& config,
                                                const std::string& datastore,
                                                const std::string& trigger, int idle_ms = 1500);

// Copies DLQ records not copied before (its own consumer group remembers) to
// the retry topic. Only records the DLQ held when called are copied: events
// that fail again while it runs are left for the next call, so a retry of a
// still-failing trigger ends. Returns how many were copied.
Result<int> RetryDeadLetters(const ClusterConfig& config, const std::string& datastore,
                             const std::string& trigger, int idle_ms = 1500);

}  // namespace cellar
