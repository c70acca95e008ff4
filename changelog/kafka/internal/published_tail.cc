#include "changelog/kafka/internal/published_tail.h"

#include <librdkafka/rdkafkacpp.h>

#include <charconv>
#include <chrono>
#include <functional>
#include <memory>
#include <set>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar::internal {
namespace {

std::string HeaderValue(RdKafka::Headers* headers, const char* name) {
  if (!headers) return "";
  RdKafka::Headers::Header h = headers->get_last(name);
  if (h.err() != RdKafka::ERR_NO_ERROR || !h.value()) return "";
  return std::string(static_cast<const char*>(h.value()), h.value_size());
}

}  // namespace

Result<ScanOffsets> PartitionEnds(KafkaProducer& producer, const std::string& topic, int partitions,
                                  int timeout_ms) {
  ScanOffsets ends;
  for (int32_t p = 0; p < partitions; ++p) {
    CELLAR_ASSIGN_OR_RETURN(ends[p], producer.PartitionHighWatermark(topic, p, timeout_ms));
  }
  return ends;
}

uint64_t SubjectHash(std::string_view subject) { return std::hash<std::string_view>{}(subject); }

Result<std::map<int32_t, PartitionTail>> ReadPublishedTail(
    const KafkaConfig& kafka, const std::string& topic, const ScanOffsets& ends,
    const std::string& stream, const ScanOffsets& scan_from, uint64_t keep_above, int timeout_ms) {
  std::map<int32_t, PartitionTail> tail;
  std::vector<RdKafka::TopicPartition*> parts;
  std::set<int32_t> remaining;
  for (const auto& [p, end] : ends) {
    auto from = scan_from.find(p);
    const int64_t start = from == scan_from.end() ? 0 : from->second;
    if (start >= end) continue;
    parts.push_back(RdKafka::TopicPartition::create(topic, p, start));
    remaining.insert(p);
  }
  if (parts.empty()) return tail;  // nothing beyond the scan offsets: no client needed
  auto consumer = MakeAssignedReader(kafka, "cellar-relay-tail", parts);
  if (!consumer.ok())
    return consumer.status().code() == StatusCode::kUnavailable
               ? Unavailable(consumer.status().message() + " (" + topic + ")")
               : consumer.status();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!remaining.empty() && std::chrono::steady_clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m((*consumer)->consume(100));
    const int32_t p = m->partition();
    if (m->err() == RdKafka::ERR__PARTITION_EOF) {
      // A read_committed reader stops at the last stable offset: an open
      // transaction of another stream in this partition holds it below
      // `ends` until it commits or the broker aborts it (its timeout), and
      // this stream's committed records may lie beyond it.
      if (auto end = ends.find(p); end == ends.end() || m->offset() >= end->second)
        remaining.erase(p);
      continue;
    }
    if (m->err() != RdKafka::ERR_NO_ERROR) continue;  // timeouts, transient errors: retry
    if (HeaderValue(m->headers(), kStreamHeader) == stream) {
      const std::string id = HeaderValue(m->headers(), kAddedIdHeader);
      uint64_t added_id = 0;
      if (std::from_chars(id.data(), id.data() + id.size(), added_id).ec == std::errc()) {
        PartitionTail& t = tail[p];
        t.highest = std::max(t.highest, added_id);
        if (added_id > keep_above) {
          const std::string subject = HeaderValue(m->headers(), kSubjectHeader);
          t.subjects[added_id] = subject.empty() ? kUnknownSubject : SubjectHash(subject);
        }
      }
    }
    if (auto end = ends.find(p); end != ends.end() && m->offset() + 1 >= end->second)
      remaining.erase(p);
  }
  (*consumer)->close();
  if (!remaining.empty())
    return Unavailable("reading what " + topic + " holds of stream " + stream +
                       " did not finish within " + std::to_string(timeout_ms) + " ms");
  return tail;
}

}  // namespace cellar::internal
