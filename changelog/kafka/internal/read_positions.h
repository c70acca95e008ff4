// ReadPositions: the offset each partition's next record should have, so that
// a record past it shows that the records in between were skipped.
//
// Why: a group member resumes at the group's committed offset. When retention
// deleted the records there before anyone read them, librdkafka resets to the
// earliest record left (auto.offset.reset) and says nothing to the
// application: a consumer that fell behind the topic's retention loses those
// events silently. Cellar's topics are not compacted, so a hole between the
// expected and the delivered offset is that loss, or what the exactly-once
// relay's Kafka transactions leave: commit markers and aborted records (the
// consumer tells them apart: change_log_consumer.cc, Lost).
//
// Threading: not thread-safe (the consumer's polling thread uses it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "changelog/kafka/change_log_consumer.h"

namespace cellar::internal {

class ReadPositions {
 public:
  // `partition` was assigned; its next record is `next` (the committed
  // offset), or unknown when `next` < 0 (nothing committed: where the reset
  // policy starts is no loss), in which case the first record read sets it.
  void Assigned(const TopicPartitionId& partition, int64_t next) {
    if (next >= 0)
      next_[partition] = next;
    else
      next_.erase(partition);
  }
  void Revoked(const TopicPartitionId& partition) { next_.erase(partition); }

  // Records that the record at `offset` of `partition` was read. Returns the
  // records skipped before it, [expected, offset), when it lies past the
  // expected offset. A record before it (read again after a rewind) is no
  // hole.
  std::optional<SkippedRecords> Read(const TopicPartitionId& partition, int64_t offset) {
    auto [it, inserted] = next_.try_emplace(partition, offset);
    std::optional<SkippedRecords> skipped;
    if (!inserted && offset > it->second) skipped = SkippedRecords{partition, it->second, offset};
    it->second = offset + 1;
    return skipped;
  }

 private:
  std::map<TopicPartitionId, int64_t> next_;
};

}  // namespace cellar::internal
