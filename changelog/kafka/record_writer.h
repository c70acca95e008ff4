// KafkaRecordWriter: produces single records and waits for each to be
// acknowledged (idempotent producer, acks=all), so a record it reported
// written is stored by Kafka. For records that must not be lost and are few:
// a trigger's dead letters, `cellar trigger dlq retry`'s copies.
// Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

class KafkaRecordWriter {
 public:
  // InvalidArgument for a bad Kafka setting (or no kafka.brokers).
  static Result<std::unique_ptr<KafkaRecordWriter>> Create(const KafkaConfig& kafka,
                                                           const std::string& client_id);
  ~KafkaRecordWriter();  // flushes for up to 5 s

  // Writes one record with `key` to a partition the producer picks. Returns
  // once Kafka acknowledged it: OK, or Unavailable when it was refused or not
  // acknowledged within 30 s (message.timeout.ms).
  Status Write(const std::string& topic, const std::string& key, const std::string& value);

  // Creates the topic with `partitions` partitions if it does not exist (see
  // KafkaProducer::EnsureTopic). Unavailable when Kafka does not answer.
  Status EnsureTopic(const std::string& topic, int partitions);

 private:
  struct Impl;
  explicit KafkaRecordWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
