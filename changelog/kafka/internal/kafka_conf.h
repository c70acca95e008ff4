// Building librdkafka configurations and managing change-log topics: the
// helpers of changelog/kafka/'s implementation files. Private to
// changelog/kafka/: this is the one Cellar header that names librdkafka
// types, and only changelog/kafka/*.cc include it (rdkafka is linked PRIVATE
// to cellar_changelog).
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "changelog/kafka/change_log_consumer.h"
#include "config/cluster_config.h"

namespace cellar {

// A global conf for any Cellar client: `settings` (the client's own
// defaults), then kafka.properties over them, then bootstrap.servers =
// kafka.brokers, and librdkafka's log lines routed to Cellar's log
// (LogKafkaLine) instead of stderr. InvalidArgument when no brokers are
// configured, when kafka.properties names a property Cellar owns
// (IsCellarOwnedKafkaProperty), or naming the setting librdkafka rejected
// (for kafka.properties: "kafka.properties.<name>" and its file:line).
Result<std::unique_ptr<RdKafka::Conf>> MakeKafkaConf(
    const KafkaConfig& kafka, const std::map<std::string, std::string>& settings);

// "" without kafka.properties, else " (kafka.properties: a, b)": appended to
// client creation errors, which a property may cause (e.g. a TLS file).
std::string KafkaPropertiesNote(const KafkaConfig& kafka);

// Writes one librdkafka log line (syslog `level`, facility `fac`) of client
// `client` as a structured line of component "kafka": 0-3 error, 4 warn,
// 5-6 info, 7 debug. Thread-safe (librdkafka calls it from its threads).
void LogKafkaLine(int level, std::string_view fac, std::string_view client,
                  std::string_view message);

// A KafkaConsumer in `group` for queries and short reads (committed offsets,
// watermarks, metadata, a topic read once): auto commit off, no topic
// auto-creation (a consumer's default: setting it explicitly makes librdkafka
// warn "AUTOCREATE ... not supported by broker" on brokers without Metadata
// v4, e.g. the local one), plus `settings`. It has not subscribed to anything. The
// caller close()s it. InvalidArgument as MakeKafkaConf, or when librdkafka
// refuses the configuration.
Result<std::unique_ptr<RdKafka::KafkaConsumer>> MakeAdminConsumer(
    const KafkaConfig& kafka, const std::string& group,
    const std::map<std::string, std::string>& settings = {});

// A MakeAdminConsumer named `name` (its group.id and client.id) assigned
// `parts`, reading from their offsets without storing or committing any and
// reporting each partition's end (ERR__PARTITION_EOF): a one-off read of a
// topic. Destroys `parts` (and clears the vector) whatever happens.
// Unavailable when the assignment fails (the consumer is closed); errors of
// MakeAdminConsumer as they are. The caller close()s the consumer.
Result<std::unique_ptr<RdKafka::KafkaConsumer>> MakeAssignedReader(
    const KafkaConfig& kafka, const std::string& name,
    std::vector<RdKafka::TopicPartition*>& parts);

// Creates `topic` with `partitions` partitions if it does not exist (Kafka's
// CreateTopics; "already exists" is success). FailedPrecondition, naming
// both counts, when it exists with another partition count. Unavailable when the broker does not
// answer within timeout_ms.
Status EnsureTopic(RdKafka::Handle* handle, const std::string& topic, int partitions,
                   int timeout_ms);

// The partition count of `topic` (0 when it does not exist; asking does
// not make a broker auto-create it). Unavailable when the broker does not answer.
Result<int> TopicPartitions(RdKafka::Handle* handle, const std::string& topic, int timeout_ms);

// The record a consumer returned, copied (key, value, position, timestamp).
ConsumedRecord RecordOf(const RdKafka::Message& m);

// The high watermark (offset of the next record) of one partition.
Result<int64_t> PartitionHighWatermark(RdKafka::Handle* handle, const std::string& topic,
                                       int32_t partition, int timeout_ms);

}  // namespace cellar
