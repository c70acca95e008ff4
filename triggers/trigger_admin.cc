#include "triggers/trigger_admin.h"

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <map>

#include "changelog/consumer_group_lag.h"
#include "changelog/kafka_conf.h"

namespace cellar {
namespace {

Result<std::unique_ptr<RdKafka::KafkaConsumer>> MakeConsumer(const ClusterConfig& config,
                                                             const std::string& group) {
  CELLAR_ASSIGN_OR_RETURN(auto conf,
                          MakeKafkaConf(config.kafka, {{"group.id", group},
                                                       {"enable.auto.commit", "false"},
                                                       {"auto.offset.reset", "earliest"},
                                                       {"session.timeout.ms", "6000"},
                                                       {"allow.auto.create.topics", "false"}}));
  std::string err;
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!c) return InvalidArgument("Kafka consumer: " + err);
  return c;
}

// Partition count of a topic (0 if absent).
int Partitions(RdKafka::KafkaConsumer* c, const std::string& topic) {
  std::string err;
  std::unique_ptr<RdKafka::Topic> t(RdKafka::Topic::create(c, topic, nullptr, err));
  RdKafka::Metadata* md = nullptr;
  if (!t || c->metadata(false, t.get(), &md, 5000) != RdKafka::ERR_NO_ERROR) return 0;
  std::unique_ptr<RdKafka::Metadata> owned(md);
  for (const auto* tm : *md->topics())
    if (tm->topic() == topic && tm->err() == RdKafka::ERR_NO_ERROR)
      return static_cast<int>(tm->partitions()->size());
  return 0;
}

std::string GroupOf(const ClusterConfig& config, const std::string& trigger) {
  return config.kafka.topic_prefix + ".trigger." + trigger;
}

}  // namespace

Result<TriggerLagReport> ReadTriggerLag(const ClusterConfig& config, const std::string& datastore,
                                        const std::string& trigger) {
  CELLAR_ASSIGN_OR_RETURN(GroupLag lag,
                          ReadGroupLag(config, GroupOf(config, trigger),
                                       {ChangeLogTopic(config.kafka, datastore),
                                        RetryTopic(config.kafka, datastore, trigger)}));
  TriggerLagReport report;
  for (const auto& p : lag.partitions)
    report.partitions.push_back(
        TriggerPartitionLag{p.topic, p.partition, p.committed, p.end, p.lag});
  report.total_lag = lag.total;
  CELLAR_ASSIGN_OR_RETURN(
      report.dead_letters,
      TopicRecordCount(config, DeadLetterTopic(config.kafka, datastore, trigger)));
  return report;
}

namespace {

// Reads the records `topic` holds when called, with `group` (subscribed,
// starting at its committed offsets); calls fn for each record and, when
// `commit`, commits the record if fn returned true. Records that arrive
// meanwhile are left for the next call: otherwise a retry of a trigger that
// still fails would read its own new dead letters and copy them forever.
// Stops once every such record was read, or after idle_ms without one.
template <typename Fn>
Status ReadAll(const ClusterConfig& config, const std::string& group, const std::string& topic,
               bool commit, int idle_ms, Fn&& fn) {
  CELLAR_ASSIGN_OR_RETURN(auto c, MakeConsumer(config, group));
  const int partitions = Partitions(c.get(), topic);
  if (partitions == 0) {
    c->close();
    return Status::Ok();  // no DLQ yet: nothing was set aside
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
  if (err != RdKafka::ERR_NO_ERROR) return Unavailable("subscribe " + topic);
  auto last = std::chrono::steady_clock::now();
  bool assigned = false;
  // Wait for the group assignment first (bounded), then until done or idle.
  auto give_up = last + std::chrono::seconds(20);
  while (remaining > 0) {
    std::unique_ptr<RdKafka::Message> m(c->consume(100));
    auto now = std::chrono::steady_clock::now();
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      assigned = true;
      auto end = end_at_start.find(m->partition());
      if (end == end_at_start.end() || m->offset() >= end->second) continue;  // arrived later
      if (fn(*m) && commit) c->commitSync(m.get());
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

}  // namespace

Result<std::vector<DeadLetter>> ListDeadLetters(const ClusterConfig& config,
                                                const std::string& datastore,
                                                const std::string& trigger, int idle_ms) {
  std::vector<DeadLetter> out;
  const std::string group = GroupOf(config, trigger) + ".dlq-list." + std::to_string(NowMicros());
  CELLAR_RETURN_IF_ERROR(ReadAll(config, group, DeadLetterTopic(config.kafka, datastore, trigger),
                                 false, idle_ms, [&](RdKafka::Message& m) {
                                   auto d = DecodeDeadLetter(std::string_view(
                                       static_cast<const char*>(m.payload()), m.len()));
                                   if (d.ok()) out.push_back(std::move(d).value());
                                   return true;
                                 }));
  return out;
}

Result<int> RetryDeadLetters(const ClusterConfig& config, const std::string& datastore,
                             const std::string& trigger, int idle_ms) {
  CELLAR_ASSIGN_OR_RETURN(auto writer, KafkaRecordWriter::Create(config.kafka, "cellar-dlq-retry"));
  const std::string retry = RetryTopic(config.kafka, datastore, trigger);
  int copied = 0;
  Status write_error;
  CELLAR_RETURN_IF_ERROR(ReadAll(
      config, GroupOf(config, trigger) + ".dlq-retry",
      DeadLetterTopic(config.kafka, datastore, trigger), true, idle_ms, [&](RdKafka::Message& m) {
        if (!write_error.ok()) return false;  // not copied: left for the next retry
        std::string key = m.key() ? *m.key() : "";
        write_error =
            writer->Write(retry, key, std::string(static_cast<const char*>(m.payload()), m.len()));
        if (!write_error.ok()) return false;
        ++copied;
        return true;
      }));
  CELLAR_RETURN_IF_ERROR(write_error);
  return copied;
}

}  // namespace cellar
