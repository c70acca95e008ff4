// What the workload of a history run did, recorded for the checks: every row
// it wrote with every version it wrote or tried to write, and how many
// operations of each kind it ran and had acknowledged.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/uuid.h"

namespace cellar::history {

enum class OpKind {
  kPut,               // a new version of a row's BASE column
  kBatch,             // put_batch of new versions of 1-3 rows
  kErase,             // erase with expected_ref_key = the live latest version
  kEraseAgain,        // erase of a column whose latest version is a tombstone
  kConflictingRetry,  // a put of an existing address with another body: Conflict
  kIdenticalRetry,    // a put of an existing address with its body: created=false
  kRead,              // latest(), compared with what was acknowledged
};
constexpr size_t kOpKinds = 7;
const char* OpKindName(OpKind k);

// One version of a row's BASE column the workload wrote or tried to write.
struct WrittenVersion {
  int64_t ref_key = 0;
  bool tombstone = false;
  nlohmann::json body;        // null for a tombstone
  bool acknowledged = false;  // false: unknown outcome (it may exist or not)
};

// A row (owned by one workload thread), its versions in ref_key order.
struct RowHistory {
  Uuid row;
  std::vector<WrittenVersion> versions;
  // After a write that stayed unacknowledged the row's state is unknown, so the
  // workload leaves it alone.
  bool abandoned = false;
  int64_t NextRef() const { return versions.empty() ? 1 : versions.back().ref_key + 1; }
};

struct OpCounts {
  std::array<uint64_t, kOpKinds> attempted{}, acknowledged{};
  uint64_t retried_calls = 0;   // client calls repeated after Unavailable
  uint64_t unacknowledged = 0;  // writes whose outcome stayed unknown
  void Add(const OpCounts& o);
  uint64_t TotalAttempted() const;
  uint64_t TotalAcknowledged() const;
};

struct History {
  std::vector<RowHistory> rows;
  OpCounts counts;
};

}  // namespace cellar::history
