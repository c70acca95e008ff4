#include "changelog/kafka/kafka_producer.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <mutex>

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
  ~Impl() {
    if (watermark_reader) watermark_reader->close();
  }
  Callbacks callbacks;  // outlives the producer (declared first, destroyed last)
  std::unique_ptr<RdKafka::Producer> producer;
  KafkaConfig kafka;
  // Asks for high watermarks (PartitionHighWatermark) as a read_uncommitted
  // reader: librdkafka's ListOffsets of any other handle (isolation.level
  // read_committed, its default) answers the last stable offset, which
  // another producer's open transaction holds below records already
  // committed. Made on first use; never subscribes or joins a group.
  std::mutex watermark_mu;
  std::unique_ptr<RdKafka::KafkaConsumer> watermark_reader;
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
  impl->kafka = kafka;
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

namespace {

// Maps a transactional API error (null: OK) to the codes kafka_producer.h gives.
Status TransactionStatus(const char* operation, RdKafka::Error* raw) {
  std::unique_ptr<RdKafka::Error> error(raw);
  if (!error) return Status::Ok();
  const std::string what = std::string("Kafka ") + operation + ": " + error->str();
  if (error->is_fatal())
    return FailedPrecondition(what + " (fatal: the producer must be replaced)");
  if (error->txn_requires_abort()) return Aborted(what + " (the transaction must be aborted)");
  return Unavailable(what);
}

}  // namespace

Status KafkaProducer::InitTransactions(int timeout_ms) {
  return impl_->Noted(
      TransactionStatus("init_transactions", impl_->producer->init_transactions(timeout_ms)));
}

Status KafkaProducer::BeginTransaction() {
  return TransactionStatus("begin_transaction", impl_->producer->begin_transaction());
}

Status KafkaProducer::CommitTransaction(int timeout_ms) {
  // commit_transaction flushes too, but serves no delivery reports of ours
  // on a timeout; flushing first reports every record on this thread.
  impl_->producer->flush(timeout_ms);
  return impl_->Noted(
      TransactionStatus("commit_transaction", impl_->producer->commit_transaction(timeout_ms)));
}

Status KafkaProducer::AbortTransaction(int timeout_ms) {
  const Status s =
      TransactionStatus("abort_transaction", impl_->producer->abort_transaction(timeout_ms));
  impl_->producer->poll(0);  // serves the purged records' delivery reports
  return impl_->Noted(s);
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
  std::lock_guard<std::mutex> lock(impl_->watermark_mu);
  if (!impl_->watermark_reader) {
    auto reader = MakeAdminConsumer(impl_->kafka, "cellar-watermarks",
                                    {{"isolation.level", "read_uncommitted"},
                                     {"client.id", impl_->callbacks.client_name + "-watermarks"}});
    if (!reader.ok()) return impl_->Noted(Result<int64_t>(reader.status()));
    impl_->watermark_reader = std::move(reader).value();
  }
  return impl_->Noted(
      cellar::PartitionHighWatermark(impl_->watermark_reader.get(), topic, partition, timeout_ms));
}

}  // namespace cellar
