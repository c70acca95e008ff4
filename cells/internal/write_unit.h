// WriteUnit: cells that must commit together (one row of a put_batch, a single
// put, or an erase), queued for the group committer of their shard.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"

namespace cellar::internal {

class AnswerGate;

struct PendingCell {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;       // ignored for an erase: the committer picks it
  std::string encoded_body;  // EncodeBody(the body); empty for tombstones
  bool tombstone = false;
};

struct WriteUnit;

// Told once that a unit's results are final (WriteUnit::completion).
class UnitCompletion {
 public:
  virtual ~UnitCompletion() = default;
  // Called exactly once per unit, on a committer thread (or on the thread
  // that submitted or stopped, when the committer is closed), never with a
  // committer lock held. The unit may be destroyed by this call: the caller
  // touches it no more. Must not block: it stalls the host's commits.
  virtual void UnitDone(WriteUnit* unit) = 0;
  // Offered by a committer as it queues a unit, before any UnitDone: the
  // gate its answering thread opens once for the units of one transaction
  // (answer_gate.h). A completion that blocks a caller sleeps on the first
  // gate offered; others ignore it. Called with the committer's lock held.
  virtual void OfferGate(const std::shared_ptr<AnswerGate>& /*gate*/) {}
};

struct WriteUnit {
  std::string datastore;
  uint32_t shard = 0;
  // Exactly one cell, a tombstone; the transaction decides whether and where
  // it is written (CellStore::Erase: DecideErase in batch_transaction.cc).
  bool erase = false;
  std::optional<int64_t> expected_ref_key;  // erase only: the caller's expected latest
  int64_t ttl_ms = 0;                       // erase only: the column's TTL (0: none)
  std::vector<PendingCell> cells;
  // Filled by the committer, one per cell, before `completion` is told.
  std::vector<Result<PutResult>> results;
  UnitCompletion* completion = nullptr;  // not owned; set before Submit
  // Set when a thread is blocked on this unit's answer (Put, PutBatch,
  // Erase; not PutAsync): the commit interval never holds such a unit, since
  // holding a caller that waits for its answer costs it throughput.
  bool caller_waits = false;
  // Set by GroupCommitter::Submit: queued by the same call as the unit before
  // it (a put_batch's next row), so the two go in one transaction if they fit.
  bool joins_previous = false;
};

}  // namespace cellar::internal
