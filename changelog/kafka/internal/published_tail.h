// What one stream already published beyond its committed checkpoint: read
// from the change log itself, so that a new owner (or the same one after a
// failed batch) republishes nothing the log already holds.
//
// Every record the exactly-once relay produces carries two headers:
// kStreamHeader (the host database of its stream) and kAddedIdHeader (the
// cell's added_id, decimal). Within one partition a stream's records are in
// added_id order and, with the stream's transactional producer, the
// committed ones form a prefix of what was produced (batches commit in
// order; an aborted batch is never visible); so the highest added_id found
// per partition by a read_committed reader tells exactly which of the
// stream's next cells are already there.
//
// The highest added_id alone is not enough after a failover that lost
// commits (`cellar host failover --accept-loss`): the relay may have
// published cells the new primary never received, whose added_ids the new
// primary then gives to other cells. So the tail also keeps which cell
// (CloudEvents subject: row/column/ref_key) each added_id was published for;
// the relay skips a cell only when Kafka holds that very cell at its added_id.
//
// Private to changelog/ (the relay); no librdkafka type appears here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "changelog/internal/stream_claim.h"
#include "changelog/kafka/kafka_producer.h"
#include "config/cluster_config.h"

namespace cellar::internal {

inline constexpr const char* kStreamHeader = "cellar-stream";
inline constexpr const char* kAddedIdHeader = "cellar-added-id";
// The CloudEvents Kafka binding's subject (cell_event.h): "row/column/ref_key".
inline constexpr const char* kSubjectHeader = "ce_subject";

// What one partition holds of a stream beyond the scan start.
struct PartitionTail {
  uint64_t highest = 0;  // the highest added_id
  // added_id -> hash of the subject (SubjectHash) of the record published at it.
  std::map<uint64_t, uint64_t> subjects;
};

// A compact fingerprint of a CloudEvents subject (std::hash; equal subjects
// hash equal within a process, which is all the comparison needs).
uint64_t SubjectHash(std::string_view subject);
// The fingerprint kept for a record without a subject header (written by a
// relay before the CloudEvents headers): it matches any cell, as the highest
// added_id alone did.
inline constexpr uint64_t kUnknownSubject = 0;
// True when Kafka's record at a position (`published`, a PartitionTail
// fingerprint) is the cell whose subject fingerprint is `cell`.
inline bool SameSubject(uint64_t published, uint64_t cell) {
  return published == kUnknownSubject || published == cell;
}

// The current end offset of each of `partitions` partitions of `topic`.
// Unavailable when the broker does not answer within timeout_ms.
Result<ScanOffsets> PartitionEnds(KafkaProducer& producer, const std::string& topic, int partitions,
                                  int timeout_ms);

// For each partition p of `ends` (PartitionEnds, taken by the caller on an
// already connected client), the records of stream `stream` (kStreamHeader)
// at offsets scan_from[p] (0 when absent) .. ends[p]-1, as a read_committed
// reader sees them (it waits for open transactions below ends[p] to end): the
// highest added_id, and the subjects of those above `keep_above` (the
// stream's checkpoint: cells at or below it are never read again);
// partitions without such a record are absent. Unavailable when the scan
// does not finish within timeout_ms.
Result<std::map<int32_t, PartitionTail>> ReadPublishedTail(
    const KafkaConfig& kafka, const std::string& topic, const ScanOffsets& ends,
    const std::string& stream, const ScanOffsets& scan_from, uint64_t keep_above, int timeout_ms);

}  // namespace cellar::internal
