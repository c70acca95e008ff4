#include "changelog/kafka/consumer_group_lag.h"

#include <librdkafka/rdkafkacpp.h>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar {
namespace {

// Partitions of `topic`; 0 when it does not exist or Kafka does not say.
int Partitions(RdKafka::KafkaConsumer* c, const std::string& topic) {
  auto n = TopicPartitions(c, topic, 5000);
  return n.ok() ? *n : 0;
}

}  // namespace

Result<GroupLag> ReadGroupLag(const ClusterConfig& config, const std::string& group,
                              const std::vector<std::string>& topics) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeAdminConsumer(config.kafka, group));
  std::vector<RdKafka::TopicPartition*> parts;
  for (const auto& topic : topics)
    for (int p = 0, n = Partitions(c.get(), topic); p < n; ++p)
      parts.push_back(RdKafka::TopicPartition::create(topic, p));
  GroupLag out;
  RdKafka::ErrorCode err = parts.empty() ? RdKafka::ERR_NO_ERROR : c->committed(parts, 5000);
  if (err != RdKafka::ERR_NO_ERROR) {
    RdKafka::TopicPartition::destroy(parts);
    c->close();
    return Unavailable("committed offsets of group " + group + ": " + RdKafka::err2str(err));
  }
  for (auto* tp : parts) {
    PartitionLag l;
    l.topic = tp->topic();
    l.partition = tp->partition();
    l.committed = tp->offset() >= 0 ? tp->offset() : -1;
    int64_t low = 0, high = 0;
    if (c->query_watermark_offsets(l.topic, l.partition, &low, &high, 5000) ==
        RdKafka::ERR_NO_ERROR)
      l.end = high;
    l.lag = std::max<int64_t>(0, l.end - (l.committed >= 0 ? l.committed : low));
    out.total += l.lag;
    out.partitions.push_back(l);
  }
  RdKafka::TopicPartition::destroy(parts);
  c->close();
  return out;
}

Status ProbeKafka(const ClusterConfig& config, int timeout_ms) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeAdminConsumer(config.kafka, "cellar-probe"));
  RdKafka::Metadata* md = nullptr;
  RdKafka::ErrorCode err = c->metadata(/*all_topics=*/false, nullptr, &md, timeout_ms);
  std::unique_ptr<RdKafka::Metadata> owned(md);
  c->close();
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("Kafka (" + config.kafka.brokers +
                       ") did not answer: " + RdKafka::err2str(err));
  return Status::Ok();
}

Result<int64_t> TopicRecordCount(const ClusterConfig& config, const std::string& topic) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeAdminConsumer(config.kafka, "cellar-topic-count"));
  int64_t total = 0;
  for (int p = 0, n = Partitions(c.get(), topic); p < n; ++p) {
    int64_t low = 0, high = 0;
    if (c->query_watermark_offsets(topic, p, &low, &high, 5000) == RdKafka::ERR_NO_ERROR)
      total += high - low;
  }
  c->close();
  return total;
}

}  // namespace cellar
