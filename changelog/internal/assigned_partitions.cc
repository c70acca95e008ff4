#include "changelog/internal/assigned_partitions.h"

#include <algorithm>

#include "changelog/partition_offsets.h"

namespace cellar {
namespace {

// A partition lagging with nothing in hand at the same position for this many
// commit rounds has the record at that position looked up in Kafka for its
// timestamp (PartitionProgress::oldest_timestamp_ms); a failed look-up is
// tried again after kRetryLookupRounds more.
constexpr int kLookupAfterRounds = 2;
constexpr int kRetryLookupRounds = 25;

}  // namespace

// Every field is guarded by AssignedPartitions::mu_.
struct AssignedPartitions::Partition {
  PartitionOffsets offsets;
  bool revoked = false;
  int64_t highest_started = -1;  // TryStart
  int64_t first_received = -1;
  int64_t committed = -1;  // next offset, as last committed
  int64_t end = -1;
  int64_t lag = 0;
  int64_t next = -1;            // the first offset not finished, as of the last round
  int rounds_at_next = 0;       // commit rounds with nothing open and lag at `next`
  int64_t looked_up = -1;       // the offset whose timestamp was looked up...
  int64_t looked_up_ts_ms = 0;  // ...and its timestamp (0: not found)
  int64_t looked_up_end = 0;    // the partition end known when it was looked up
};

AssignedPartitions::Ref AssignedPartitions::Track(const TopicPartitionId& tp, int64_t offset,
                                                  int64_t timestamp_ms) {
  MutexLock lock(&mu_);
  Ref& p = parts_[tp];
  if (!p) {
    p = std::make_shared<Partition>();
    p->first_received = offset;
  }
  p->offsets.Track(offset, timestamp_ms);
  return p;
}

void AssignedPartitions::MarkDone(const Ref& p, int64_t offset) {
  MutexLock lock(&mu_);
  if (!p->revoked) p->offsets.Done(offset);
}

bool AssignedPartitions::Current(const Ref& p) const {
  MutexLock lock(&mu_);
  return !p->revoked;
}

bool AssignedPartitions::TryStart(const Ref& p, int64_t offset,
                                  const std::function<bool()>& stopping) {
  MutexLock lock(&mu_);
  if (p->revoked || (p->highest_started < offset && stopping())) return false;
  p->highest_started = std::max(p->highest_started, offset);
  return true;
}

std::vector<PartitionProgress> AssignedPartitions::Progress() const {
  MutexLock lock(&mu_);
  std::vector<PartitionProgress> out;
  for (const auto& [tp, ref] : parts_) {
    const Partition& p = *ref;
    int64_t oldest = p.offsets.oldest_open_timestamp_ms();
    int64_t lag = p.lag;
    if (p.offsets.open() == 0 && p.looked_up == p.next && p.looked_up_ts_ms == kNoVisibleRecord &&
        p.end <= p.looked_up_end)
      lag = 0;  // only transaction markers (or aborted records) lie between next and the end
    if (p.offsets.open() == 0) oldest = lag > 0 && p.looked_up == p.next ? p.looked_up_ts_ms : 0;
    out.push_back(PartitionProgress{tp, p.committed, p.end, lag, p.offsets.open(), oldest});
  }
  return out;
}

std::vector<AssignedPartitions::CommitCandidate> AssignedPartitions::StartCommitRound() const {
  MutexLock lock(&mu_);
  std::vector<CommitCandidate> out;
  out.reserve(parts_.size());
  for (const auto& [tp, p] : parts_)
    out.push_back(CommitCandidate{tp, p, p->offsets.committable(), p->committed});
  return out;
}

std::optional<RecordPosition> AssignedPartitions::AfterCommit(const CommitCandidate& c,
                                                              bool committed,
                                                              std::optional<int64_t> end) {
  MutexLock lock(&mu_);
  Partition& p = *c.part;
  if (p.revoked) return std::nullopt;
  if (committed) p.committed = std::max(p.committed, c.committable + 1);
  if (!end) return std::nullopt;
  p.end = std::max(p.end, *end);  // a stale end between the broker's answers
  const int64_t next = std::max({c.committable + 1, p.committed, p.first_received});
  p.lag = std::max<int64_t>(0, p.end - next);
  const bool stuck = p.lag > 0 && p.offsets.open() == 0 && next == p.next;
  p.rounds_at_next = stuck ? p.rounds_at_next + 1 : 0;
  p.next = next;
  if (p.rounds_at_next >= kLookupAfterRounds && p.looked_up != next)
    return RecordPosition{c.tp.topic, c.tp.partition, next};
  // Nothing visible was there when looked up, but the end moved since:
  // records may have come after the marker.
  if (p.rounds_at_next >= kLookupAfterRounds && p.looked_up_ts_ms == kNoVisibleRecord &&
      p.end > p.looked_up_end)
    return RecordPosition{c.tp.topic, c.tp.partition, next};
  if (p.rounds_at_next >= kLookupAfterRounds + kRetryLookupRounds && p.looked_up_ts_ms == 0) {
    p.rounds_at_next = kLookupAfterRounds;
    return RecordPosition{c.tp.topic, c.tp.partition, next};
  }
  return std::nullopt;
}

void AssignedPartitions::RecordLookedUp(const std::vector<RecordPosition>& positions,
                                        const std::vector<int64_t>* timestamps_ms) {
  MutexLock lock(&mu_);
  for (size_t i = 0; i < positions.size(); ++i) {
    auto it = parts_.find(TopicPartitionId{positions[i].topic, positions[i].partition});
    if (it == parts_.end()) continue;
    it->second->looked_up = positions[i].offset;
    it->second->looked_up_ts_ms = timestamps_ms ? (*timestamps_ms)[i] : 0;
    it->second->looked_up_end = it->second->end;
  }
}

void AssignedPartitions::Revoke(const std::vector<TopicPartitionId>& tps) {
  MutexLock lock(&mu_);
  for (const auto& tp : tps) {
    auto it = parts_.find(tp);
    if (it == parts_.end()) continue;
    it->second->revoked = true;
    parts_.erase(it);
  }
}

}  // namespace cellar
