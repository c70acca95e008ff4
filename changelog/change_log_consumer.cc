#include "changelog/change_log_consumer.h"

#include "changelog/kafka_conf.h"

namespace cellar {

Result<std::unique_ptr<ChangeLogConsumer>> ChangeLogConsumer::Create(
    const ClusterConfig& config, const std::vector<std::string>& datastores,
    const ConsumerOptions& options) {
  std::vector<std::string> topics;
  for (const auto& d : datastores) {
    if (!config.FindDatastore(d)) return InvalidArgument("unknown datastore '" + d + "'");
    topics.push_back(ChangeLogTopic(config.kafka, d));
  }
  for (const auto& t : options.extra_topics) topics.push_back(t);
  const bool grouped = !options.group_id.empty();
  CELLAR_ASSIGN_OR_RETURN(
      auto conf,
      MakeKafkaConf(config.kafka,
                    {{"group.id", grouped ? options.group_id : "cellar-reader-ungrouped"},
                     {"client.id", options.client_id},
                     {"enable.auto.commit", "false"},
                     {"enable.auto.offset.store", "false"},
                     {"auto.offset.reset", options.from_beginning ? "earliest" : "latest"},
                     {"session.timeout.ms", std::to_string(options.session_timeout_ms)},
                     {"heartbeat.interval.ms", std::to_string(options.session_timeout_ms / 3)},
                     {"topic.metadata.refresh.interval.ms", "5000"},
                     {"fetch.wait.max.ms", "10"}}));
  std::string err;
  if (options.rebalance_cb &&
      conf->set("rebalance_cb", options.rebalance_cb, err) != RdKafka::Conf::CONF_OK)
    return InvalidArgument("Kafka rebalance_cb: " + err);
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!c) return InvalidArgument("Kafka consumer: " + err);
  RdKafka::ErrorCode e;
  if (grouped) {
    e = c->subscribe(topics);
  } else {
    std::vector<RdKafka::TopicPartition*> parts;
    for (const auto& t : topics)
      for (int p = 0; p < config.kafka.partitions; ++p)
        parts.push_back(RdKafka::TopicPartition::create(t, p,
                                                        options.from_beginning
                                                            ? RdKafka::Topic::OFFSET_BEGINNING
                                                            : RdKafka::Topic::OFFSET_END));
    e = c->assign(parts);
    RdKafka::TopicPartition::destroy(parts);
  }
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka subscribe: " + RdKafka::err2str(e));
  return std::unique_ptr<ChangeLogConsumer>(new ChangeLogConsumer(std::move(c)));
}

ChangeLogConsumer::~ChangeLogConsumer() { Close(); }

void ChangeLogConsumer::Close() {
  if (closed_ || !consumer_) return;
  closed_ = true;
  consumer_->close();
}

Result<std::optional<ConsumedRecord>> ChangeLogConsumer::PollRecord(int timeout_ms) {
  std::unique_ptr<RdKafka::Message> m(consumer_->consume(timeout_ms));
  switch (m->err()) {
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR__PARTITION_EOF:
      return std::optional<ConsumedRecord>();
    case RdKafka::ERR_NO_ERROR:
      break;
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR__UNKNOWN_TOPIC:
      return std::optional<ConsumedRecord>();  // not created yet: nothing to read
    default:
      return Unavailable("Kafka consume: " + m->errstr());
  }
  ConsumedRecord r;
  r.topic = m->topic_name();
  r.partition = m->partition();
  r.offset = m->offset();
  if (m->key()) r.key = *m->key();
  r.value.assign(static_cast<const char*>(m->payload()), m->len());
  r.broker_timestamp_ms = m->timestamp().timestamp;
  return std::optional<ConsumedRecord>(std::move(r));
}

Result<std::optional<ConsumedEvent>> ChangeLogConsumer::Poll(int timeout_ms) {
  CELLAR_ASSIGN_OR_RETURN(auto rec, PollRecord(timeout_ms));
  if (!rec) return std::optional<ConsumedEvent>();
  const std::string where =
      rec->topic + "/" + std::to_string(rec->partition) + "@" + std::to_string(rec->offset);
  auto ev = DecodeCellEvent(rec->value);
  if (!ev.ok()) return InvalidArgument("record " + where + ": " + ev.status().message());
  ConsumedEvent out;
  out.event = std::move(ev).value();
  out.topic = rec->topic;
  out.partition = rec->partition;
  out.offset = rec->offset;
  out.broker_timestamp_ms = rec->broker_timestamp_ms;
  return std::optional<ConsumedEvent>(std::move(out));
}

Status ChangeLogConsumer::Commit(const std::string& topic, int32_t partition, int64_t offset) {
  std::vector<RdKafka::TopicPartition*> parts{
      RdKafka::TopicPartition::create(topic, partition, offset + 1)};
  RdKafka::ErrorCode e = consumer_->commitSync(parts);
  RdKafka::TopicPartition::destroy(parts);
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka commit: " + RdKafka::err2str(e));
  return Status::Ok();
}

}  // namespace cellar
