#include "changelog/kafka/consumer_group_lag.h"

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar {
namespace {

// Partitions of `topic`; 0 when it does not exist or Kafka does not say.
int Partitions(RdKafka::KafkaConsumer* c, const std::string& topic) {
  auto n = TopicPartitions(c, topic, 5000);
  return n.ok() ? *n : 0;
}

}  // namespace

double GroupLag::OldestAgeSeconds(int64_t now_ms) const {
  int64_t oldest = 0;
  for (const auto& p : partitions)
    if (p.lag > 0 && p.oldest_timestamp_ms > 0 && (oldest == 0 || p.oldest_timestamp_ms < oldest))
      oldest = p.oldest_timestamp_ms;
  return oldest == 0 ? 0 : static_cast<double>(std::max<int64_t>(0, now_ms - oldest)) / 1e3;
}

Result<std::vector<int64_t>> ReadRecordTimestamps(const KafkaConfig& kafka,
                                                  const std::vector<RecordPosition>& positions,
                                                  int timeout_ms) {
  std::vector<int64_t> out(positions.size(), 0);
  if (positions.empty()) return out;
  std::map<std::pair<std::string, int32_t>, std::vector<size_t>> wanted;  // -> indexes
  std::vector<RdKafka::TopicPartition*> parts;
  for (size_t i = 0; i < positions.size(); ++i) {
    auto& w = wanted[{positions[i].topic, positions[i].partition}];
    if (w.empty())
      parts.push_back(RdKafka::TopicPartition::create(positions[i].topic, positions[i].partition,
                                                      positions[i].offset));
    else  // one read per partition: from its smallest offset asked
      for (auto* tp : parts)
        if (tp->topic() == positions[i].topic && tp->partition() == positions[i].partition)
          tp->set_offset(std::min(tp->offset(), positions[i].offset));
    w.push_back(i);
  }
  CELLAR_ASSIGN_OR_RETURN(auto consumer,
                          MakeAssignedReader(kafka, "cellar-record-timestamps", parts));
  size_t left = positions.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(50));
    if (m->err() == RdKafka::ERR__PARTITION_EOF) {
      // The reader (read_committed) is at the end of what it can see: the
      // positions still open have no visible record at or after them.
      auto it = wanted.find({m->topic_name(), m->partition()});
      if (it != wanted.end())
        for (size_t i : it->second)
          if (out[i] == 0 && m->offset() >= positions[i].offset) {
            out[i] = kNoVisibleRecord;
            --left;
          }
      continue;
    }
    if (m->err() != RdKafka::ERR_NO_ERROR) continue;  // timeouts, transient errors
    auto it = wanted.find({m->topic_name(), m->partition()});
    if (it == wanted.end()) continue;
    for (size_t i : it->second)
      if (out[i] == 0 && m->offset() >= positions[i].offset) {
        out[i] = std::max<int64_t>(1, m->timestamp().timestamp);
        --left;
      }
  }
  consumer->close();
  return out;
}

Result<GroupLag> ReadGroupLag(const ClusterConfig& config, const std::string& group,
                              const std::vector<std::string>& topics, bool with_oldest) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeAdminConsumer(config.kafka, group));
  std::vector<RdKafka::TopicPartition*> parts;
  for (const auto& topic : topics)
    for (int p = 0, n = Partitions(c.get(), topic); p < n; ++p)
      parts.push_back(RdKafka::TopicPartition::create(topic, p));
  GroupLag out;
  std::vector<RecordPosition> oldest;  // the lagging partitions' committed positions, in order
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
    out.partitions.push_back(l);
    if (l.lag > 0) oldest.push_back({l.topic, l.partition, l.committed >= 0 ? l.committed : low});
  }
  RdKafka::TopicPartition::destroy(parts);
  c->close();
  // A group that committed past every record it can see still sits before
  // the transaction markers (commit/abort) the exactly-once relay's batches
  // end with, and before aborted records: the end counts them, a consumer
  // never gets them. Such a partition is caught up.
  if (!oldest.empty()) {
    auto ts = ReadRecordTimestamps(config.kafka, oldest, 5000);
    if (ts.ok())
      for (size_t i = 0, j = 0; i < out.partitions.size() && j < oldest.size(); ++i)
        if (out.partitions[i].topic == oldest[j].topic &&
            out.partitions[i].partition == oldest[j].partition) {
          const int64_t t = (*ts)[j++];
          if (t == kNoVisibleRecord)
            out.partitions[i].lag = 0;
          else if (with_oldest)
            out.partitions[i].oldest_timestamp_ms = t;
        }
  }
  for (const PartitionLag& l : out.partitions) out.total += l.lag;
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
