// The consumer groups of Cellar's own change-log readers, named in one place
// so that the workers, the CLI, the benchmarks and the tests agree.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "config/cluster_config.h"

namespace cellar {

// "<prefix>.indexer": the index workers (indexes/index_worker.h).
std::string IndexerGroup(const KafkaConfig& kafka);

// "<prefix>.trigger.<trigger>": the processes running trigger `trigger`
// (triggers/trigger_worker.h); each named trigger is its own group.
std::string TriggerGroup(const KafkaConfig& kafka, const std::string& trigger);

// Lag and oldest unprocessed age of Cellar's consumer groups, read from Kafka
// alone (committed offsets, partition ends and the timestamp of the record at
// each lagging partition's committed offset: ReadGroupLag with_oldest), so
// they work with no consumer running; for `cellar status`. The processes
// export the same figures live (cellar_index_lag_events,
// cellar_index_oldest_unprocessed_age_seconds, cellar_trigger_lag_events,
// cellar_trigger_oldest_unprocessed_age_seconds), from their own in-memory
// positions, so those lead these by up to a commit interval. On the change
// logs a record's timestamp is its cell's created_at: GroupLag::total is the
// lag in events and GroupLag::OldestAgeSeconds(now) the age.
// Unavailable when Kafka does not answer.

// The index workers' group (IndexerGroup) on the change log of `datastore`:
// the lag and age of every index of that datastore (one group applies them
// all, in the same transactions).
Result<GroupLag> ReadIndexerLag(const ClusterConfig& config, const std::string& datastore);

// Trigger `trigger`'s group (TriggerGroup) on `topics` (its datastore's change
// log, and its retry topic if wanted: a retry record's timestamp is when it
// was set aside, not its cell's created_at).
Result<GroupLag> ReadTriggerGroupLag(const ClusterConfig& config, const std::string& trigger,
                                     const std::vector<std::string>& topics);

}  // namespace cellar
