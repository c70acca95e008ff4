// GroupCommitter: the per-host writer of the group commit.
//
// Units of every shard and datastore of the host wait in one queue. A fixed
// pool of writer threads, each with its own MySQL connection (a registered
// writer of the host's write fence), takes everything waiting (up to
// max_batch_cells cells; short of the units past the last count that fits one
// INSERT, see UnitsForOneStatement) and commits it as ONE transaction: one multi-row
// INSERT ... RETURNING per datastore and a single COMMIT (one fsync; a batch of one datastore is a
// single autocommit INSERT, see batch_transaction.h). While one thread commits, new arrivals
// accumulate for the next, so batches grow with load (the Tera tablet-writer idea). A second
// transaction starts while one is in flight only when enough cells wait (min_pipelined_cells):
// small batches cost the server far more per cell than the wait for the running commit. In flight
// transactions never wait for each other's commit (write_fence.h).
//
// Threading: Submit() is thread-safe. Stop() (and the destructor) lets the
// running transactions end, then fails still-queued units with Unavailable:
// once it returns, every submitted unit's completion has been told.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "cells/internal/batch_transaction.h"
#include "cells/internal/group_commit_probe.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

struct GroupCommitterOptions {
  int threads = 2;            // writer connections, i.e. transactions in flight
  int max_batch_cells = 256;  // cells per transaction
  // While a transaction is in flight, another writer starts one only once at
  // least this many cells wait; fewer wait for the running commit to end and
  // join the next, larger batch (0: start at once, any size).
  int min_pipelined_cells = 16;
  // A writer with nothing in flight that just answered N > 1 units waits up
  // to this long for N units to queue before it starts (0: no wait).
  int linger_us = 0;
  std::string database;  // the host database (ClusterConfig::HostDatabase)
};

class GroupCommitter {
 public:
  // `probe` (nullable: no metrics) is not owned and outlives the committer.
  GroupCommitter(MysqlEndpoint endpoint, GroupCommitterOptions options,
                 GroupCommitProbe* probe = nullptr);
  ~GroupCommitter();

  // Queues `units` together (a put_batch's rows land in one transaction when
  // they fit); each unit's completion is told once its results are final
  // (Unavailable results, at once on this thread, when the committer stopped).
  // REQUIRES: each unit lives until its completion is told; unit->cells not
  // empty; unit->completion set.
  void Submit(const std::vector<WriteUnit*>& units);

  // Fails queued units and joins the threads. Idempotent.
  void Stop();

 private:
  void WriterLoop();
  // True when a waiting writer should start a transaction now: cells wait and
  // either nothing is in flight or at least min_pipelined_cells wait. Submit()
  // wakes a writer only then, so callers arriving behind a running commit do
  // not wake the idle writer once each just to send it back to sleep.
  bool WriterMayStart() const REQUIRES(mu_);
  // Commits `units` in one transaction (with retries) and answers every unit.
  void Commit(std::unique_ptr<MysqlConnection>& conn, std::vector<WriteUnit*>& units);
  // RunGroupTransaction with reconnects and deadlock/lock-timeout retries.
  Status CommitWithRetries(std::unique_ptr<MysqlConnection>& conn,
                           std::vector<DatastoreBatch>& batches);

  const MysqlEndpoint endpoint_;
  const GroupCommitterOptions options_;
  GroupCommitProbe* const probe_;
  Mutex mu_;
  CondVar cv_;
  std::deque<WriteUnit*> queue_ GUARDED_BY(mu_);
  size_t queued_cells_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;  // transactions being committed
  bool stopping_ GUARDED_BY(mu_) = false;
  // Units a lingering writer waits for (0: none lingers); Submit() wakes it
  // only once that many wait.
  size_t lingering_for_ GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace cellar::internal
