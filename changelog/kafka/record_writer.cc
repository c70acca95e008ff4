#include "changelog/kafka/record_writer.h"

#include <chrono>
#include <future>

#include "base/mutex.h"
#include "changelog/kafka/kafka_producer.h"

namespace cellar {

struct KafkaRecordWriter::Impl {
  std::unique_ptr<KafkaProducer> producer;
  Mutex poll_mu;  // one Poll() at a time; guards no data (producer is set once)
};

KafkaRecordWriter::KafkaRecordWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<KafkaRecordWriter>> KafkaRecordWriter::Create(const KafkaConfig& kafka,
                                                                     const std::string& client_id) {
  ProducerOptions options;
  options.settings = {{"enable.idempotence", "true"},
                      {"acks", "all"},
                      {"linger.ms", "0"},
                      {"message.timeout.ms", "30000"},
                      {"client.id", client_id}};
  // Each Write waits on its own promise, handed to the producer as the opaque.
  options.on_delivery = [](void* opaque, const Status& status, int64_t) {
    if (opaque) static_cast<std::promise<Status>*>(opaque)->set_value(status);
  };
  auto impl = std::make_unique<Impl>();
  CELLAR_ASSIGN_OR_RETURN(impl->producer, KafkaProducer::Create(kafka, std::move(options)));
  return std::unique_ptr<KafkaRecordWriter>(new KafkaRecordWriter(std::move(impl)));
}

KafkaRecordWriter::~KafkaRecordWriter() {
  if (impl_->producer) impl_->producer->Flush(5000).IgnoreError();
}

Status KafkaRecordWriter::EnsureTopic(const std::string& topic, int partitions) {
  return impl_->producer->EnsureTopic(topic, partitions, 5000);
}

Status KafkaRecordWriter::Write(const std::string& topic, const std::string& key,
                                const std::string& value) {
  std::promise<Status> done;
  auto fut = done.get_future();
  Status queued = impl_->producer->Produce(topic, KafkaProducer::kAnyPartition, key, value,
                                           /*timestamp_ms=*/0, {}, &done);
  if (!queued.ok()) return Unavailable(queued.message());
  // The report arrives by message.timeout.ms at the latest; the promise must
  // outlive the record, so wait for it rather than give up early.
  while (fut.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    MutexLock lock(&impl_->poll_mu);
    impl_->producer->Poll(10);
  }
  Status delivered = fut.get();
  if (!delivered.ok()) return Unavailable("produce to " + topic + ": " + delivered.message());
  return Status::Ok();
}

}  // namespace cellar
