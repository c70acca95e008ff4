// AssignedPartitions: the bookkeeping of the partitions a keyed consumer
// holds. Per assignment of a partition: which offsets are open and finished
// (PartitionOffsets), what was last committed, the partition's end and the
// group's lag, and, for a partition that lags with nothing in hand, the
// timestamp of the record the group waits at (looked up in Kafka by the
// caller when AfterCommit asks for it).
//
// A partition assigned again gets a new Partition: events of the revoked one
// still running find it revoked (Current) and their MarkDone is ignored, so a
// finished event of an old assignment never moves the new owner's commit.
//
// Thread-safe. The polling thread tracks records, runs commit rounds and
// revokes; pool threads mark events done and ask Current.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "changelog/keyed_consumer.h"

namespace cellar {

class AssignedPartitions {
 public:
  struct Partition;  // one assignment of a partition (private to the .cc)
  using Ref = std::shared_ptr<Partition>;

  // The record at `offset` of `tp` was received and is open; returns tp's
  // current assignment (a new one when tp holds none). Offsets of one
  // partition arrive in increasing order.
  Ref Track(const TopicPartitionId& tp, int64_t offset, int64_t timestamp_ms);

  // The record at `offset` of `p` is finished; ignored once `p` is revoked.
  void MarkDone(const Ref& p, int64_t offset);

  // False once `p` was revoked (its events are no longer this member's).
  bool Current(const Ref& p) const;

  // Whether the event at `offset` of `p` may start, recording it as started:
  // false once `p` is revoked, and, when `stopping()` (the consumer stops or
  // is paused), false unless a later offset of `p` started already. So the
  // handled events of a partition stay a prefix through a stop, and the last
  // commit covers every one of them (none is delivered again). `stopping` is
  // read under the lock: a start it allowed is seen by every later call.
  bool TryStart(const Ref& p, int64_t offset, const std::function<bool()>& stopping);

  // Each assigned partition's commit, end, lag, open events and the
  // timestamp of its oldest unprocessed record (PartitionProgress).
  std::vector<PartitionProgress> Progress() const;

  // One partition's state at the start of a commit round.
  struct CommitCandidate {
    TopicPartitionId tp;
    Ref part;
    int64_t committable = -1;  // the finished prefix's last offset; -1: none
    int64_t committed = -1;    // next offset, as last committed; -1: never
    // The finished prefix goes beyond the last commit: commit committable + 1.
    bool worth_committing() const { return committable >= 0 && committable + 1 > committed; }
  };
  // Every assigned partition, for a commit round.
  std::vector<CommitCandidate> StartCommitRound() const;

  // Records the round's outcome for `c`: whether its commit succeeded, and
  // the partition's end when known. Returns the position whose record
  // timestamp the caller should look up (RecordLookedUp) when the partition
  // has lagged at the same position with nothing open for a few rounds.
  std::optional<RecordPosition> AfterCommit(const CommitCandidate& c, bool committed,
                                            std::optional<int64_t> end);

  // The record timestamps of `positions` (from AfterCommit), or null when the
  // look-up failed (it is asked again some rounds later).
  void RecordLookedUp(const std::vector<RecordPosition>& positions,
                      const std::vector<int64_t>* timestamps_ms);

  // `tps` are no longer assigned: their current assignments are revoked.
  void Revoke(const std::vector<TopicPartitionId>& tps);

 private:
  mutable Mutex mu_;
  std::map<TopicPartitionId, Ref> parts_ GUARDED_BY(mu_);
};

}  // namespace cellar
