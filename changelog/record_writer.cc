#include "changelog/record_writer.h"

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <future>

#include "base/mutex.h"
#include "changelog/kafka_conf.h"

namespace cellar {
namespace {

class Delivery : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& m) override {
    auto* p = static_cast<std::promise<RdKafka::ErrorCode>*>(m.msg_opaque());
    if (p) p->set_value(m.err());
  }
};

}  // namespace

struct KafkaRecordWriter::Impl {
  Delivery delivery;  // outlives the producer (declared first, destroyed last)
  std::unique_ptr<RdKafka::Producer> producer;
  Mutex poll_mu;  // one poll() at a time; guards no data (producer is set once)
};

KafkaRecordWriter::KafkaRecordWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<KafkaRecordWriter>> KafkaRecordWriter::Create(const KafkaConfig& kafka,
                                                                     const std::string& client_id) {
  CELLAR_ASSIGN_OR_RETURN(auto conf, MakeKafkaConf(kafka, {{"enable.idempotence", "true"},
                                                           {"acks", "all"},
                                                           {"linger.ms", "0"},
                                                           {"message.timeout.ms", "30000"},
                                                           {"client.id", client_id}}));
  auto impl = std::make_unique<Impl>();
  std::string err;
  if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&impl->delivery), err) !=
      RdKafka::Conf::CONF_OK)
    return InvalidArgument("Kafka dr_cb: " + err);
  impl->producer.reset(RdKafka::Producer::create(conf.get(), err));
  if (!impl->producer) return InvalidArgument("Kafka producer: " + err);
  return std::unique_ptr<KafkaRecordWriter>(new KafkaRecordWriter(std::move(impl)));
}

KafkaRecordWriter::~KafkaRecordWriter() {
  if (impl_->producer) impl_->producer->flush(5000);
}

Status KafkaRecordWriter::EnsureTopic(const std::string& topic, int partitions) {
  return cellar::EnsureTopic(impl_->producer.get(), topic, partitions, 5000);
}

Status KafkaRecordWriter::Write(const std::string& topic, const std::string& key,
                                const std::string& value) {
  std::promise<RdKafka::ErrorCode> done;
  auto fut = done.get_future();
  RdKafka::ErrorCode err = impl_->producer->produce(
      topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY,
      const_cast<char*>(value.data()), value.size(), key.data(), key.size(), 0, &done);
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("produce to " + topic + ": " + RdKafka::err2str(err));
  // The report arrives by message.timeout.ms at the latest; the promise must
  // outlive the record, so wait for it rather than give up early.
  while (fut.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    MutexLock lock(&impl_->poll_mu);
    impl_->producer->poll(10);
  }
  err = fut.get();
  if (err != RdKafka::ERR_NO_ERROR)
    return Unavailable("produce to " + topic + ": " + RdKafka::err2str(err));
  return Status::Ok();
}

}  // namespace cellar
