// The consumer groups of Cellar's own change-log readers, named in one place
// so that the workers, the CLI, the benchmarks and the tests agree.
#pragma once

#include <string>

#include "config/cluster_config.h"

namespace cellar {

// "<prefix>.indexer": the index workers (indexes/index_worker.h).
std::string IndexerGroup(const KafkaConfig& kafka);

// "<prefix>.trigger.<trigger>": the processes running trigger `trigger`
// (triggers/trigger_worker.h); each named trigger is its own group.
std::string TriggerGroup(const KafkaConfig& kafka, const std::string& trigger);

}  // namespace cellar
