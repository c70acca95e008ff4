#include "changelog/kafka/topic_snapshot.h"

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <map>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar {

Status ReadTopicSnapshot(const ClusterConfig& config, const std::string& group,
                         const std::string& topic, bool commit, int idle_ms,
                         const std::function<bool(const ConsumedRecord&)>& fn) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeAdminConsumer(config.kafka, group,
                                                    {{"auto.offset.reset", "earliest"},
                                                     {"session.timeout.ms", "6000"}}));
  auto counted = TopicPartitions(c.get(), topic, 5000);
  const int partitions = counted.ok() ? *counted : 0;
  if (partitions == 0) {
    c->close();
    return Status::Ok();  // no such topic: nothing to read
  }
  std::map<int32_t, int64_t> end_at_start;  // partition -> high watermark when called
  int64_t remaining = 0;                    // records between the group's offsets and those ends
  {
    std::vector<RdKafka::TopicPartition*> parts;
    for (int p = 0; p < partitions; ++p) parts.push_back(RdKafka::TopicPartition::create(topic, p));
    const bool have_committed = c->committed(parts, 5000) == RdKafka::ERR_NO_ERROR;
    Status s;
    for (auto* tp : parts) {
      int64_t low = 0, high = 0;
      if (c->query_watermark_offsets(topic, tp->partition(), &low, &high, 5000) !=
          RdKafka::ERR_NO_ERROR) {
        s = Unavailable("watermarks of " + topic + "/" + std::to_string(tp->partition()));
        break;
      }
      end_at_start[tp->partition()] = high;
      const int64_t from = have_committed && tp->offset() >= 0 ? std::max(tp->offset(), low) : low;
      remaining += std::max<int64_t>(0, high - from);
    }
    RdKafka::TopicPartition::destroy(parts);
    if (!s.ok() || remaining == 0) {
      c->close();
      return s;
    }
  }
  RdKafka::ErrorCode err = c->subscribe({topic});
  if (err != RdKafka::ERR_NO_ERROR) {
    c->close();
    return Unavailable("subscribe " + topic + ": " + RdKafka::err2str(err));
  }
  auto last = std::chrono::steady_clock::now();
  bool assigned = false;
  // Wait for the group assignment first (bounded), then until done or idle.
  const auto give_up = last + std::chrono::seconds(20);
  while (remaining > 0) {
    std::unique_ptr<RdKafka::Message> m(c->consume(100));
    const auto now = std::chrono::steady_clock::now();
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      assigned = true;
      auto end = end_at_start.find(m->partition());
      if (end == end_at_start.end() || m->offset() >= end->second) continue;  // arrived later
      if (fn(RecordOf(*m)) && commit) c->commitSync(m.get());
      last = now;
      --remaining;
      continue;
    }
    if (!assigned) {
      std::vector<RdKafka::TopicPartition*> a;
      c->assignment(a);
      assigned = !a.empty();
      RdKafka::TopicPartition::destroy(a);
      if (assigned) last = now;
      if (now > give_up) break;
      continue;
    }
    if (now - last > std::chrono::milliseconds(idle_ms)) break;
  }
  c->close();
  return Status::Ok();
}

}  // namespace cellar
