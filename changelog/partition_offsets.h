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
  // A record at `offset` was received (offsets arrive in increasing order).
  void Track(int64_t offset) { open_.emplace(offset, false); }
  // The record at `offset` is handled or set aside.
  void Done(int64_t offset) {
    auto it = open_.find(offset);
    if (it != open_.end()) it->second = true;
    while (!open_.empty() && open_.begin()->second) {
      committable_ = open_.begin()->first;
      open_.erase(open_.begin());
    }
  }
  // The highest offset with every earlier tracked record done, or -1.
  int64_t committable() const { return committable_; }
  size_t open() const { return open_.size(); }

 private:
  std::map<int64_t, bool> open_;  // offset -> done
  int64_t committable_ = -1;
};

}  // namespace cellar
