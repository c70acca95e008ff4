// GroupCommitProbe: one host's group-commit metrics, each registered here and
// nowhere else; the host's GroupCommitter updates them.
//   cellar_group_commit_transactions_total{host}         transactions committed
//   cellar_group_commit_failed_transactions_total{host}  transactions that failed after their
//       retries (host down, lost connection, a frozen shard's units): their cells were
//       answered with the error
//   cellar_group_commit_cells_total{host}                cells of committed transactions (new,
//       idempotent repeats and conflicts alike: what the transactions answered)
//   cellar_group_commit_queued_cells{host}               cells waiting for a writer (gauge;
//       set when a writer takes a transaction, and at each submit while more than
//       max_batch_cells wait)
//   cellar_group_commit_writer_seconds{host,phase}       a writer thread's time per
//       transaction (histogram): phase="waiting" for cells to take, "committing" the
//       transaction (round trips, the server's work and fsync, retries), "answering":
//       handing its callers' answers to the answering thread, which wakes them. The sums over time
//       show where the writers go: a host whose writers mostly commit is bound by the database, one
//       whose writers mostly wait is bound by its callers.
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe.
#pragma once

#include <string>

#include "base/metrics.h"

namespace cellar::internal {

class GroupCommitProbe {
 public:
  // Registers the host's series (so they render, at 0, before any write).
  GroupCommitProbe(MetricsRegistry* registry, const std::string& host);

  // One transaction of `cells` cells ended: committed (ok) or failed.
  void TransactionEnded(bool ok, size_t cells) {
    if (ok) {
      transactions_.Increment();
      cells_.Increment(cells);
    } else {
      failed_.Increment();
    }
  }
  void SetQueuedCells(size_t cells) { queued_cells_.Set(static_cast<double>(cells)); }
  Counter& held() { return held_; }
  Histogram& waiting() { return waiting_; }
  Histogram& committing() { return committing_; }
  Histogram& answering() { return answering_; }

 private:
  Counter& transactions_;
  Counter& failed_;
  Counter& cells_;
  Counter& held_;
  Gauge& queued_cells_;
  Histogram& waiting_;
  Histogram& committing_;
  Histogram& answering_;
};

}  // namespace cellar::internal
