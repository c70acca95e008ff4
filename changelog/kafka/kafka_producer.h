// KafkaProducer: librdkafka's producer behind an interface with no librdkafka
// type in it. The relay publishes the change log through it; `cellar-bench
// relay` measures a bare producer of the same payloads with it. It adds no
// Cellar logic: records go where the caller says, with the settings the
// caller gives.
//
// Threading: Produce, Outstanding, the counters and the topic queries may be
// called from any thread, also concurrently; Poll and Flush serve the
// callbacks on the calling thread, so the caller decides which thread that is
// (the relay: one poll thread). PurgeAll must not run concurrently with
// Produce.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

// One Kafka record header.
struct RecordHeader {
  std::string_view name;
  std::string_view value;
};

// An error librdkafka reported outside any one record.
struct ProducerError {
  bool fatal = false;        // the producer is unusable (e.g. an idempotence violation)
  bool unreachable = false;  // no broker answers (all brokers down, transport error)
  std::string text;
};

struct ProducerOptions {
  // librdkafka settings besides bootstrap.servers (= kafka.brokers), e.g.
  // {"acks", "all"}, {"enable.idempotence", "true"}, {"client.id", ...}.
  std::map<std::string, std::string> settings;
  // Called once per produced record, inside Poll()/Flush()/PurgeAll(): the
  // `opaque` given to Produce, OK and the record's offset, or the error (then
  // offset is -1). May be empty.
  std::function<void(void* opaque, const Status& status, int64_t offset)> on_delivery;
  // Called inside Poll()/Flush() for each producer-level error. May be empty.
  std::function<void(const ProducerError&)> on_error;
};

class KafkaProducer {
 public:
  // InvalidArgument naming the setting librdkafka rejected, when no
  // kafka.brokers are configured, or when librdkafka refuses to create it.
  static Result<std::unique_ptr<KafkaProducer>> Create(const KafkaConfig& kafka,
                                                       ProducerOptions options);
  // Destroys the producer without flushing: call Flush() first to keep what is
  // queued. Delivery callbacks are not called after this returns.
  ~KafkaProducer();
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  // Produce to this partition: the producer's partitioner picks one by key.
  static constexpr int32_t kAnyPartition = -1;

  // Queues one record (copied) for `partition` of `topic`; an empty `key`
  // sends none, timestamp_ms 0 lets librdkafka stamp it. On OK on_delivery
  // gets `opaque` later. ResourceExhausted when the local queue is full
  // (Poll() and try again); Unavailable for any other refusal. On an error
  // the record is not queued and on_delivery will not see `opaque`.
  Status Produce(const std::string& topic, int32_t partition, std::string_view key,
                 std::string_view value, int64_t timestamp_ms,
                 std::span<const RecordHeader> headers = {}, void* opaque = nullptr);

  // Serves delivery reports and errors for up to timeout_ms (0: only what is
  // ready).
  void Poll(int timeout_ms);

  // Serves callbacks until nothing is queued or in flight, or timeout_ms
  // passed. OK, or DeadlineExceeded naming how many records are left.
  Status Flush(int timeout_ms);

  // Records queued or in flight (not yet reported).
  int Outstanding() const;

  // Drops every queued and in-flight record; each is reported failed to
  // on_delivery within this call.
  void PurgeAll();

  // Kafka transactions, for a producer created with a "transactional.id"
  // setting (relay.exactly_once: one per stream). Each returns OK, or:
  //  - FailedPrecondition: the producer is unusable (a fatal error, e.g.
  //    fenced: another producer with the same transactional.id initialised
  //    after it, or an idempotence violation such as librdkafka 2.0.2's
  //    OUT_OF_ORDER_SEQUENCE after a broker restart): destroy it and create a
  //    new one, whose InitTransactions bumps the epoch;
  //  - Aborted: the transaction cannot commit; call AbortTransaction, then
  //    the records produced in it are never seen by read_committed readers;
  //  - Unavailable: timed out or another retriable error; the same call may
  //    be retried (or the transaction aborted).
  // Every message names the operation and librdkafka's error. Call them
  // from one thread at a time; Produce may run on others in between.
  //
  // Registers the transactional.id with its coordinator, fencing every older
  // producer of it and aborting a transaction it left open. Once this
  // returns OK no record of an older producer can still become visible to
  // read_committed readers.
  Status InitTransactions(int timeout_ms);
  Status BeginTransaction();
  // Flushes what was produced in the transaction (serving delivery reports
  // on the calling thread) and commits it.
  Status CommitTransaction(int timeout_ms);
  // Purges what is queued, and aborts the transaction.
  Status AbortTransaction(int timeout_ms);

  // Records reported delivered / failed so far.
  uint64_t delivered() const;
  uint64_t failed() const;

  // Creates `topic` with `partitions` partitions if it does not exist (Kafka's
  // CreateTopics; "already exists" is success). FailedPrecondition, naming
  // both counts, when it exists with another partition count. Unavailable when the broker does
  // not answer within timeout_ms.
  Status EnsureTopic(const std::string& topic, int partitions, int timeout_ms);

  // The partition count of `topic` (0 when it does not exist; asking does
  // not make a broker auto-create it). Unavailable when the broker does not answer.
  Result<int> TopicPartitions(const std::string& topic, int timeout_ms);

  // The high watermark (offset of the next record, committed or not) of one
  // partition: not the last stable offset, which an open transaction holds
  // back. Unavailable when the broker does not answer within timeout_ms.
  Result<int64_t> PartitionHighWatermark(const std::string& topic, int32_t partition,
                                         int timeout_ms);

 private:
  struct Impl;
  explicit KafkaProducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
