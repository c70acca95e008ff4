#include "triggers/dead_letter.h"

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

}  // namespace cellar
