#include "triggers/dead_letter.h"

#include <chrono>
#include <future>

#include "changelog/kafka_conf.h"

namespace cellar {

std::string DeadLetterTopic(const KafkaConfig& kafka, const std::string& datastore,
                            const std::string& trigger) {
  return kafka.topic_prefix + "." + datastore + "." + trigger + ".dlq";
}

std::string RetryTopic(const KafkaConfig& kafka, const std::string& datastore,
                       const std::string& trigger) {
  return kafka.topic_prefix + "." + datastore + "." + trigger + ".retry";
}

std::string EncodeDeadLetter(const DeadLetter& d) {
  auto event = nlohmann::json::parse(d.event_json, nullptr, false);
  nlohmann::json j = {
      {"trigger", d.trigger},
      {"datastore", d.datastore},
      {"error", d.error},
      {"attempts", d.attempts},
      {"failed_at", FormatRfc3339(d.failed_at)},
      {"source",
       {{"topic", d.source_topic}, {"partition", d.source_partition}, {"offset", d.source_offset}}},
      {"event", event.is_discarded() ? nlohmann::json(d.event_json) : event}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<DeadLetter> DecodeDeadLetter(std::string_view value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_object())
    return InvalidArgument("not a dead-letter record");
  DeadLetter d;
  d.trigger = j.value("trigger", "");
  d.datastore = j.value("datastore", "");
  d.error = j.value("error", "");
  d.attempts = j.value("attempts", 0);
  auto t = ParseRfc3339(j.value("failed_at", ""));
  d.failed_at = t.ok() ? *t : 0;
  if (j.contains("source") && j["source"].is_object()) {
    d.source_topic = j["source"].value("topic", "");
    d.source_partition = j["source"].value("partition", -1);
    d.source_offset = j["source"].value("offset", int64_t{-1});
  }
  d.event_json = j["event"].dump();
  return d;
}

class KafkaRecordWriter::Delivery : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& m) override {
    auto* p = static_cast<std::promise<RdKafka::ErrorCode>*>(m.msg_opaque());
    if (p) p->set_value(m.err());
  }
};

Result<std::unique_ptr<KafkaRecordWriter>> KafkaRecordWriter::Create(const KafkaConfig& kafka,
                                                                     const std::string& client_id) {
  CELLAR_ASSIGN_OR_RETURN(auto conf, MakeKafkaConf(kafka, {{"enable.idempotence", "true"},
                                                           {"acks", "all"},
                                                           {"linger.ms", "0"},
                                                           {"message.timeout.ms", "30000"},
                                                           {"client.id", client_id}}));
  auto w = std::unique_ptr<KafkaRecordWriter>(new KafkaRecordWriter());
  w->delivery_ = std::make_unique<Delivery>();
  std::string err;
  conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(w->delivery_.get()), err);
  w->producer_.reset(RdKafka::Producer::create(conf.get(), err));
  if (!w->producer_) return InvalidArgument("Kafka producer: " + err);
  return w;
}

KafkaRecordWriter::~KafkaRecordWriter() {
  if (producer_) producer_->flush(5000);
}

Status KafkaRecordWriter::EnsureTopic(const std::string& topic, int partitions) {
  return cellar::EnsureTopic(producer_.get(), topic, partitions, 5000);
}

Status KafkaRecordWriter::Write(const std::string& topic, const std::string& key,
                                const std::string& value) {
  std::promise<RdKafka::ErrorCode> done;
  auto fut = done.get_future();
  RdKafka::ErrorCode err = producer_->produce(
      topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
      const_cast<char*>(value.data()), value.size(), key.data(), key.size(), 0, &done);
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("produce to " + topic + ": " + RdKafka::err2str(err));
  // The report arrives by message.timeout.ms at the latest; the promise must
  // outlive the record, so wait for it rather than give up early.
  while (fut.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(poll_mu_);
    producer_->poll(10);
  }
  err = fut.get();
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("produce to " + topic + ": " + RdKafka::err2str(err));
  return Status::Ok();
}

}  // namespace cellar
