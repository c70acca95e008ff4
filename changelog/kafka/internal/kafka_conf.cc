#include "changelog/kafka/internal/kafka_conf.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <thread>

#include "base/log.h"

namespace cellar {

namespace {

void LogCallback(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  LogKafkaLine(level, fac ? fac : "", rk ? rd_kafka_name(rk) : "", buf ? buf : "");
}

}  // namespace

void LogKafkaLine(int level, std::string_view fac, std::string_view client,
                  std::string_view message) {
  const LogLevel l = level <= 3   ? LogLevel::kError
                     : level == 4 ? LogLevel::kWarn
                     : level <= 6 ? LogLevel::kInfo
                                  : LogLevel::kDebug;
  Log(l, "kafka", message,
      {{"client", std::string(client)},
       {"facility", std::string(fac)},
       {"syslog_level", std::to_string(level)}});
}

std::string KafkaPropertiesNote(const KafkaConfig& kafka) {
  if (kafka.properties.empty()) return "";
  std::string names;
  for (const auto& [k, v] : kafka.properties) names += (names.empty() ? "" : ", ") + k;
  return " (kafka.properties: " + names + ")";
}

Result<std::unique_ptr<RdKafka::Conf>> MakeKafkaConf(
    const KafkaConfig& kafka, const std::map<std::string, std::string>& settings) {
  if (kafka.brokers.empty())
    return InvalidArgument("kafka.brokers is not set in the cluster config");
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  // Before anything else, so that even a warning about a setting below is
  // a structured line. A client built with an event_cb (KafkaProducer) gets
  // its log lines there instead and forwards them to LogKafkaLine too.
  rd_kafka_conf_set_log_cb(conf->c_ptr_global(), LogCallback);
  std::string err;
  for (const auto& [k, v] : settings)
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK)
      return InvalidArgument("kafka setting " + k + "=" + v + ": " + err);
  for (const auto& [k, v] : kafka.properties) {
    auto origin = kafka.property_origins.find(k);
    const std::string where =
        (origin == kafka.property_origins.end() ? "" : origin->second + ": ") +
        "kafka.properties." + k;
    if (std::string why; IsCellarOwnedKafkaProperty(k, &why))
      return InvalidArgument(where + ": is set by Cellar and cannot be configured: " + why);
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK)
      return InvalidArgument(where + ": librdkafka rejects '" + v + "': " + err);
  }
  if (conf->set("bootstrap.servers", kafka.brokers, err) != RdKafka::Conf::CONF_OK)
    return InvalidArgument("kafka.brokers: " + err);
  return conf;
}

Result<std::unique_ptr<RdKafka::KafkaConsumer>> MakeAdminConsumer(
    const KafkaConfig& kafka, const std::string& group,
    const std::map<std::string, std::string>& settings) {
  std::map<std::string, std::string> all = {{"group.id", group}, {"enable.auto.commit", "false"}};
  for (const auto& [k, v] : settings) all[k] = v;
  CELLAR_ASSIGN_OR_RETURN(auto conf, MakeKafkaConf(kafka, all));
  std::string err;
  std::unique_ptr<RdKafka::KafkaConsumer> c(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!c) return InvalidArgument("Kafka consumer: " + err + KafkaPropertiesNote(kafka));
  return c;
}

Result<std::unique_ptr<RdKafka::KafkaConsumer>> MakeAssignedReader(
    const KafkaConfig& kafka, const std::string& name,
    std::vector<RdKafka::TopicPartition*>& parts) {
  auto consumer = MakeAdminConsumer(kafka, name,
                                    {{"client.id", name},
                                     {"enable.auto.offset.store", "false"},
                                     {"auto.offset.reset", "earliest"},
                                     {"enable.partition.eof", "true"},
                                     {"fetch.wait.max.ms", "10"}});
  RdKafka::ErrorCode e = consumer.ok() ? (*consumer)->assign(parts) : RdKafka::ERR_NO_ERROR;
  RdKafka::TopicPartition::destroy(parts);
  parts.clear();
  if (!consumer.ok()) return consumer.status();
  if (e != RdKafka::ERR_NO_ERROR) {
    (*consumer)->close();
    return Unavailable(std::string("Kafka assign: ") + RdKafka::err2str(e));
  }
  return consumer;
}

Result<int> TopicPartitions(RdKafka::Handle* handle, const std::string& topic, int timeout_ms) {
  // All topics, not this one: a producer's metadata request for one topic
  // makes a broker with auto.create.topics.enable create it with the
  // broker's default partition count.
  RdKafka::Metadata* md = nullptr;
  RdKafka::ErrorCode err = handle->metadata(true, nullptr, &md, timeout_ms);
  std::unique_ptr<RdKafka::Metadata> owned(md);
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("metadata for topic " + topic + ": " + RdKafka::err2str(err));
  for (const auto* tm : *md->topics())
    if (tm->topic() == topic && tm->err() == RdKafka::ERR_NO_ERROR)
      return static_cast<int>(tm->partitions()->size());
  return 0;
}

namespace {

Status CheckPartitions(const std::string& topic, int have, int want) {
  if (have == want) return Status::Ok();
  return FailedPrecondition("topic " + topic + " has " + std::to_string(have) +
                            " partitions but Cellar needs " + std::to_string(want) +
                            " (kafka.partitions for a change-log topic); a topic's partitions "
                            "decide which rows share one, so Cellar does not change them");
}

}  // namespace

Status EnsureTopic(RdKafka::Handle* handle, const std::string& topic, int partitions,
                   int timeout_ms) {
  CELLAR_ASSIGN_OR_RETURN(int existing, TopicPartitions(handle, topic, timeout_ms));
  if (existing > 0) return CheckPartitions(topic, existing, partitions);
  rd_kafka_t* rk = handle->c_ptr();
  char errstr[512];
  rd_kafka_NewTopic_t* nt =
      rd_kafka_NewTopic_new(topic.c_str(), partitions, -1, errstr, sizeof errstr);
  if (!nt) return InvalidArgument("topic " + topic + ": " + errstr);
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr, sizeof errstr);
  rd_kafka_CreateTopics(rk, &nt, 1, opts, q);
  Status result = Unavailable("Kafka did not answer CreateTopics for " + topic + " within " +
                              std::to_string(timeout_ms) + " ms");
  rd_kafka_event_t* ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
  if (ev) {
    if (rd_kafka_event_error(ev)) {
      result = Unavailable("CreateTopics " + topic + ": " + rd_kafka_event_error_string(ev));
    } else if (const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev)) {
      size_t n = 0;
      const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(res, &n);
      result = Status::Ok();
      for (size_t i = 0; i < n; ++i) {
        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(topics[i]);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
          result = Unavailable("CreateTopics " + topic + ": " + rd_kafka_err2str(e));
      }
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_queue_destroy(q);
  if (!result.ok()) return result;

  // The new topic reaches the metadata a moment after CreateTopics answers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int created = 0;
  while (true) {
    CELLAR_ASSIGN_OR_RETURN(created, TopicPartitions(handle, topic, timeout_ms));
    if (created > 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (created == 0)
    return Unavailable("topic " + topic + " was created but is not in Kafka's metadata after " +
                       std::to_string(timeout_ms) + " ms");
  return CheckPartitions(topic, created, partitions);
}

ConsumedRecord RecordOf(const RdKafka::Message& m) {
  ConsumedRecord r;
  r.topic = m.topic_name();
  r.partition = m.partition();
  r.offset = m.offset();
  if (m.key()) r.key = *m.key();
  r.value.assign(static_cast<const char*>(m.payload()), m.len());
  r.broker_timestamp_ms = m.timestamp().timestamp;
  return r;
}

Result<int64_t> PartitionHighWatermark(RdKafka::Handle* handle, const std::string& topic,
                                       int32_t partition, int timeout_ms) {
  int64_t low = 0, high = 0;
  RdKafka::ErrorCode err =
      handle->query_watermark_offsets(topic, partition, &low, &high, timeout_ms);
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("watermarks of " + topic + "/" + std::to_string(partition) + ": " +
                       RdKafka::err2str(err));
  return high;
}

}  // namespace cellar
