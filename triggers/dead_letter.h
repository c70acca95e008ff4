// Dead letters: events a trigger set aside after its retry policy ran out.
//
// Topics (per trigger):
//   <prefix>.<datastore>.<trigger>.dlq    set-aside events, key row_key, value:
//     {"trigger":"billing","datastore":"trips","error":"Unavailable: ...","attempts":5,
//      "failed_at":"2026-...Z","source":{"topic":"cellar.trips.cells","partition":3,"offset":17},
//      "event":{...the change-log event JSON...}}
//   <prefix>.<datastore>.<trigger>.retry  records `cellar trigger dlq retry` copies back
//     from the DLQ; the running trigger consumes them like new events.
// Records are written with KafkaRecordWriter (changelog/record_writer.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/record_writer.h"  // KafkaRecordWriter, which writes dead letters
#include "config/cluster_config.h"

namespace cellar {

std::string DeadLetterTopic(const KafkaConfig& kafka, const std::string& datastore,
                            const std::string& trigger);
std::string RetryTopic(const KafkaConfig& kafka, const std::string& datastore,
                       const std::string& trigger);

struct DeadLetter {
  std::string trigger;
  std::string datastore;
  std::string error;
  int attempts = 0;
  MicrosSinceEpoch failed_at = 0;
  std::string source_topic;
  int32_t source_partition = -1;
  int64_t source_offset = -1;
  std::string event_json;  // the change-log record value (EncodeCellEvent)
};

std::string EncodeDeadLetter(const DeadLetter& d);
Result<DeadLetter> DecodeDeadLetter(std::string_view value);

}  // namespace cellar
