#include "changelog/kafka/kafka_producer.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar {
namespace {

class Callbacks : public RdKafka::DeliveryReportCb, public RdKafka::EventCb {
 public:
  explicit Callbacks(ProducerOptions options) : options_(std::move(options)) {}

  void dr_cb(RdKafka::Message& m) override {
    const bool ok = m.err() == RdKafka::ERR_NO_ERROR;
    (ok ? delivered : failed).fetch_add(1, std::memory_order_relaxed);
    if (!options_.on_delivery) return;
    options_.on_delivery(m.msg_opaque(),
                         ok ? Status::Ok() : Unavailable("Kafka delivery: " + m.errstr()),
                         ok ? m.offset() : -1);
  }

  // With an event_cb librdkafka hands its log lines here rather than to the
  // conf's log_cb (MakeKafkaConf): they go to Cellar's log all the same.
  void event_cb(RdKafka::Event& e) override {
    if (e.type() == RdKafka::Event::EVENT_LOG) {
      LogKafkaLine(static_cast<int>(e.severity()), e.fac(), client_name, e.str());
      return;
    }
    if (e.type() != RdKafka::Event::EVENT_ERROR || !options_.on_error) return;
    ProducerError error;
    error.fatal = e.fatal();
    error.unreachable =
        e.err() == RdKafka::ERR__ALL_BROKERS_DOWN || e.err() == RdKafka::ERR__TRANSPORT;
    error.text = e.str();
    options_.on_error(error);
  }

  std::atomic<uint64_t> delivered{0}, failed{0};
  std::string client_name;  // client.id, for log lines; set before the producer exists

 private:
  const ProducerOptions options_;
};

}  // namespace

struct KafkaProducer::Impl {
  explicit Impl(ProducerOptions options) : callbacks(std::move(options)) {}
  Callbacks callbacks;  // outlives the producer (declared first, destroyed last)
  std::unique_ptr<RdKafka::Producer> producer;
  // Appended to "broker does not answer" errors: a property (e.g. a wrong
  // security.protocol) is a likely cause.
  std::string properties_note;

  Status Noted(Status s) const {
    if (s.code() != StatusCode::kUnavailable || properties_note.empty()) return s;
    return Unavailable(s.message() + properties_note);
  }
  template <typename T>
  Result<T> Noted(Result<T> r) const {
    if (r.ok()) return r;
    return Noted(r.status());
  }
};

static_assert(KafkaProducer::kAnyPartition == RD_KAFKA_PARTITION_UA);

KafkaProducer::KafkaProducer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KafkaProducer::~KafkaProducer() = default;

Result<std::unique_ptr<KafkaProducer>> KafkaProducer::Create(const KafkaConfig& kafka,
                                                             ProducerOptions options) {
  CELLAR_ASSIGN_OR_RETURN(auto conf, MakeKafkaConf(kafka, options.settings));
  std::string client_id = "rdkafka";
  if (auto it = options.settings.find("client.id"); it != options.settings.end())
    client_id = it->second;
  if (auto it = kafka.properties.find("client.id"); it != kafka.properties.end())
    client_id = it->second;
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->callbacks.client_name = client_id;
  impl->properties_note = KafkaPropertiesNote(kafka);
  std::string err;
  conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&impl->callbacks), err);
  conf->set("event_cb", static_cast<RdKafka::EventCb*>(&impl->callbacks), err);
  impl->producer.reset(RdKafka::Producer::create(conf.get(), err));
  if (!impl->producer)
    return InvalidArgument("Kafka producer: " + err + KafkaPropertiesNote(kafka));
  return std::unique_ptr<KafkaProducer>(new KafkaProducer(std::move(impl)));
}

Status KafkaProducer::Produce(const std::string& topic, int32_t partition, std::string_view key,
                              std::string_view value, int64_t timestamp_ms,
                              std::span<const RecordHeader> headers, void* opaque) {
  RdKafka::Headers* h = nullptr;
  if (!headers.empty()) {
    h = RdKafka::Headers::create();
    for (const RecordHeader& header : headers)
      h->add(std::string(header.name), header.value.data(), header.value.size());
  }
  RdKafka::ErrorCode err = impl_->producer->produce(
      topic, partition, RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
      value.size(), key.empty() ? nullptr : key.data(), key.size(), timestamp_ms, h, opaque);
  if (err == RdKafka::ERR_NO_ERROR) return Status::Ok();
  delete h;  // not taken over by librdkafka
  if (err == RdKafka::ERR__QUEUE_FULL)
    return ResourceExhausted("Kafka producer queue full: " + RdKafka::err2str(err));
  return Unavailable("produce to " + topic + ": " + RdKafka::err2str(err));
}

void KafkaProducer::Poll(int timeout_ms) { impl_->producer->poll(timeout_ms); }

Status KafkaProducer::Flush(int timeout_ms) {
  if (impl_->producer->flush(timeout_ms) == RdKafka::ERR_NO_ERROR) return Status::Ok();
  return DeadlineExceeded(std::to_string(impl_->producer->outq_len()) +
                          " records still unacknowledged after " + std::to_string(timeout_ms) +
                          " ms");
}

int KafkaProducer::Outstanding() const { return impl_->producer->outq_len(); }

void KafkaProducer::PurgeAll() {
  impl_->producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
  impl_->producer->poll(0);  // serves the purged records' delivery reports
}

uint64_t KafkaProducer::delivered() const {
  return impl_->callbacks.delivered.load(std::memory_order_relaxed);
}
uint64_t KafkaProducer::failed() const {
  return impl_->callbacks.failed.load(std::memory_order_relaxed);
}

Status KafkaProducer::EnsureTopic(const std::string& topic, int partitions, int timeout_ms) {
  return impl_->Noted(cellar::EnsureTopic(impl_->producer.get(), topic, partitions, timeout_ms));
}

Result<int> KafkaProducer::TopicPartitions(const std::string& topic, int timeout_ms) {
  return impl_->Noted(cellar::TopicPartitions(impl_->producer.get(), topic, timeout_ms));
}

Result<int64_t> KafkaProducer::PartitionHighWatermark(const std::string& topic, int32_t partition,
                                                      int timeout_ms) {
  return impl_->Noted(
      cellar::PartitionHighWatermark(impl_->producer.get(), topic, partition, timeout_ms));
}

}  // namespace cellar
