#include "tests/history/history.h"

#include <numeric>

namespace cellar::history {

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kPut:
      return "put";
    case OpKind::kBatch:
      return "batch";
    case OpKind::kErase:
      return "erase";
    case OpKind::kEraseAgain:
      return "erase_again";
    case OpKind::kConflictingRetry:
      return "conflicting_retry";
    case OpKind::kIdenticalRetry:
      return "identical_retry";
    case OpKind::kRead:
      return "read";
  }
  return "?";
}

void OpCounts::Add(const OpCounts& o) {
  for (size_t i = 0; i < kOpKinds; ++i) {
    attempted[i] += o.attempted[i];
    acknowledged[i] += o.acknowledged[i];
  }
  retried_calls += o.retried_calls;
  unacknowledged += o.unacknowledged;
}

uint64_t OpCounts::TotalAttempted() const {
  return std::accumulate(attempted.begin(), attempted.end(), uint64_t{0});
}

uint64_t OpCounts::TotalAcknowledged() const {
  return std::accumulate(acknowledged.begin(), acknowledged.end(), uint64_t{0});
}

}  // namespace cellar::history
