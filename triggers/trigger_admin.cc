#include "triggers/trigger_admin.h"

#include "changelog/consumer_groups.h"
#include "changelog/kafka/record_writer.h"
#include "changelog/kafka/topic_snapshot.h"

namespace cellar {

Result<TriggerLagReport> ReadTriggerLag(const ClusterConfig& config, const std::string& datastore,
                                        const std::string& trigger) {
  CELLAR_ASSIGN_OR_RETURN(GroupLag lag,
                          ReadTriggerGroupLag(config, trigger,
                                              {ChangeLogTopic(config.kafka, datastore),
                                               RetryTopic(config.kafka, datastore, trigger)}));
  TriggerLagReport report;
  report.oldest_unprocessed_age_seconds = lag.OldestAgeSeconds(NowMicros() / 1000);
  report.partitions = std::move(lag.partitions);
  report.total_lag = lag.total;
  CELLAR_ASSIGN_OR_RETURN(
      report.dead_letters,
      TopicRecordCount(config, DeadLetterTopic(config.kafka, datastore, trigger)));
  return report;
}

Result<std::vector<DeadLetter>> ListDeadLetters(const ClusterConfig& config,
                                                const std::string& datastore,
                                                const std::string& trigger, int idle_ms) {
  std::vector<DeadLetter> out;
  const std::string group =
      TriggerGroup(config.kafka, trigger) + ".dlq-list." + std::to_string(NowMicros());
  CELLAR_RETURN_IF_ERROR(ReadTopicSnapshot(config, group,
                                           DeadLetterTopic(config.kafka, datastore, trigger),
                                           /*commit=*/false, idle_ms, [&](const ConsumedRecord& r) {
                                             auto d = DecodeDeadLetter(r.value);
                                             if (d.ok()) out.push_back(std::move(d).value());
                                             return true;
                                           }));
  return out;
}

Result<int> RetryDeadLetters(const ClusterConfig& config, const std::string& datastore,
                             const std::string& trigger, int idle_ms) {
  CELLAR_ASSIGN_OR_RETURN(auto writer, KafkaRecordWriter::Create(config.kafka, "cellar-dlq-retry"));
  const std::string retry = RetryTopic(config.kafka, datastore, trigger);
  int copied = 0;
  Status write_error;
  CELLAR_RETURN_IF_ERROR(ReadTopicSnapshot(config,
                                           TriggerGroup(config.kafka, trigger) + ".dlq-retry",
                                           DeadLetterTopic(config.kafka, datastore, trigger),
                                           /*commit=*/true, idle_ms, [&](const ConsumedRecord& r) {
                                             if (!write_error.ok())
                                               return false;  // not copied: left for the next retry
                                             write_error = writer->Write(retry, r.key, r.value);
                                             if (!write_error.ok()) return false;
                                             ++copied;
                                             return true;
                                           }));
  CELLAR_RETURN_IF_ERROR(write_error);
  return copied;
}

}  // namespace cellar
