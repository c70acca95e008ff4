#include "changelog/consumer_groups.h"

#include "changelog/cell_event.h"

namespace cellar {

std::string IndexerGroup(const KafkaConfig& kafka) { return kafka.topic_prefix + ".indexer"; }

std::string TriggerGroup(const KafkaConfig& kafka, const std::string& trigger) {
  return kafka.topic_prefix + ".trigger." + trigger;
}

Result<GroupLag> ReadIndexerLag(const ClusterConfig& config, const std::string& datastore) {
  return ReadGroupLag(config, IndexerGroup(config.kafka), {ChangeLogTopic(config.kafka, datastore)},
                      /*with_oldest=*/true);
}

Result<GroupLag> ReadTriggerGroupLag(const ClusterConfig& config, const std::string& trigger,
                                     const std::vector<std::string>& topics) {
  return ReadGroupLag(config, TriggerGroup(config.kafka, trigger), topics, /*with_oldest=*/true);
}

}  // namespace cellar
