// WriteUnit: cells that must commit together (one row of a put_batch, a single
// put, or an erase), queued for the group committer of their shard.
#pragma once

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"

namespace cellar::internal {

struct PendingCell {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;       // ignored for an erase: the committer picks it
  std::string encoded_body;  // EncodeBody(the body); empty for tombstones
  bool tombstone = false;
};

struct WriteUnit {
  std::string datastore;
  uint32_t shard = 0;
  bool erase = false;  // exactly one cell, a tombstone at (latest ref_key + 1)
  std::vector<PendingCell> cells;
  // Filled by the committer, one per cell, before `done` is set.
  std::vector<Result<PutResult>> results;
  std::promise<void> done;
};

}  // namespace cellar::internal
