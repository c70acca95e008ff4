// PartitionOffsets (for change-log consumers): which offset of one partition may be committed.
// Records finish out of order (different rows run concurrently); the commit point is the end of the
// longest prefix of finished records, so a crash re-delivers every unfinished record and never
// skips one. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>

namespace cellar {

class PartitionOffsets {
 public:
  // A record at `offset` was received (offsets arrive in increasing order);
  // `timestamp_ms` is its record timestamp (oldest_open_timestamp_ms).
  void Track(int64_t offset, int64_t timestamp_ms = 0) {
    open_.emplace(offset, Open{false, timestamp_ms});
  }
  // The record at `offset` is handled or set aside.
  void Done(int64_t offset) {
    auto it = open_.find(offset);
    if (it != open_.end()) it->second.done = true;
    while (!open_.empty() && open_.begin()->second.done) {
      committable_ = open_.begin()->first;
      open_.erase(open_.begin());
    }
  }
  // The highest offset with every earlier tracked record done, or -1.
  int64_t committable() const { return committable_; }
  size_t open() const { return open_.size(); }
  // The timestamp of the oldest record received and not done (the first
  // tracked one not done: every earlier one is); 0 when none is open.
  int64_t oldest_open_timestamp_ms() const {
    return open_.empty() ? 0 : open_.begin()->second.timestamp_ms;
  }

 private:
  struct Open {
    bool done;
    int64_t timestamp_ms;
  };
  std::map<int64_t, Open> open_;  // offset -> state
  int64_t committable_ = -1;
};

}  // namespace cellar
