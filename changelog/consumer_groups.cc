#include "changelog/consumer_groups.h"

namespace cellar {

std::string IndexerGroup(const KafkaConfig& kafka) { return kafka.topic_prefix + ".indexer"; }

std::string TriggerGroup(const KafkaConfig& kafka, const std::string& trigger) {
  return kafka.topic_prefix + ".trigger." + trigger;
}

}  // namespace cellar
