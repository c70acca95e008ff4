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
// A writer does not answer its units itself: it hands them to the host's one
// answering thread and goes back for the next batch. Waking 16 blocked callers
// took a writer ~120 us per transaction (each woken caller tends to preempt
// it), 12% of its cycle; handing them on costs ~20 us, and measured +6% single
// puts and +15% put_batch (6 alternating pairs of `cellar-bench put`).
//
// Writers connect to the host's current primary (TopologyView) and verify it
// (VerifyPrimary) before they register with its write fence. When the
// primary cannot be reached, or a failover demoted it, a transaction is held
// (retried as the view changes) for up to hold_writes_ms from its first
// attempt, then fails Unavailable. A retry after a commit whose outcome was
// lost finds the cells already there (idempotent by address), so a held
// write is never written twice.
//
// Threading: Submit() is thread-safe. Completions are told on the answering
// thread (or on Submit's/Stop()'s thread for refused and stopped units), so
// a completion that blocks holds up every answer of the host. Stop() (and the
// destructor) lets the running transactions end and their answers be told,
// then fails still-queued units with Unavailable: once it returns, every
// submitted unit's completion has been told.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "cells/host_topology.h"
#include "cells/internal/answer_gate.h"
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
  // While fewer than min_pipelined_cells cells wait, a transaction starts at
  // most this long after the host's previous one started (0: whenever a
  // writer is free). Never while a unit whose caller is blocked on its
  // answer waits (WriteUnit::caller_waits: holding it costs that caller
  // throughput), and only while puts arrive as transactions run
  // (PutsArriveDuringCommits), at any rate.
  int commit_interval_us = 0;
  std::string database;  // the host database (ClusterConfig::HostDatabase)
  // How long a transaction waits for a reachable, verified primary before it
  // fails Unavailable (mysql.hold_writes), milliseconds.
  int64_t hold_writes_ms = 10000;
  // Offered each unit whose shard this host refuses as frozen (moving or
  // moved away, cells/shard_move.h): returns true when it handed the unit to
  // the shard's current host (the unit is then no longer this committer's),
  // false to fail it Unavailable. Called on a writer thread; must not block
  // for long. Empty: fail it.
  std::function<bool(WriteUnit*)> reroute;
};

// A writer thread's connection and the topology epoch it was verified at.
struct WriterConnection {
  std::unique_ptr<MysqlConnection> conn;
  uint64_t epoch = 0;
};

class GroupCommitter {
 public:
  // Writes to mysql.hosts[host]'s primary as `topology` says. `topology` and
  // `probe` (nullable: no metrics) are not owned and outlive the committer.
  GroupCommitter(TopologyView* topology, size_t host, GroupCommitterOptions options,
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
  // Whether commit_interval_us applies: one of the last 4 transactions saw
  // cells arrive while it ran (group_committer.cc).
  bool PutsArriveDuringCommits() const REQUIRES(mu_);
  // Commits `units` in one transaction (with retries) and answers every unit.
  void Commit(WriterConnection& conn, std::vector<WriteUnit*>& units);
  // RunGroupTransaction with reconnects, deadlock/lock-timeout retries and
  // the hold through a failover.
  Status CommitWithRetries(WriterConnection& conn, std::vector<DatastoreBatch>& batches);
  // Connects to the current primary, verifies it and registers as a writer.
  Status Reconnect(WriterConnection& conn);
  bool Stopping();

  TopologyView* const topology_;
  const size_t host_;
  const GroupCommitterOptions options_;
  GroupCommitProbe* const probe_;
  Mutex mu_;
  CondVar cv_;
  std::deque<WriteUnit*> queue_ GUARDED_BY(mu_);
  // Offered to the units queued until a writer takes them (a new one then):
  // their blocked callers sleep on it together (answer_gate.h).
  std::shared_ptr<AnswerGate> forming_gate_ GUARDED_BY(mu_) = std::make_shared<AnswerGate>();
  size_t queued_cells_ GUARDED_BY(mu_) = 0;
  // Queued units whose caller is blocked on the answer (WriteUnit::caller_waits):
  // while there are any, no writer waits for commit_interval_us.
  size_t queued_waiting_callers_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;  // transactions being committed
  bool stopping_ GUARDED_BY(mu_) = false;
  // Units a lingering writer waits for (0: none lingers); Submit() wakes it
  // only once that many wait.
  size_t lingering_for_ GUARDED_BY(mu_) = 0;
  // When the host's last transaction started, and whether a writer waits
  // for commit_interval_us past it (Submit() then wakes it only for
  // min_pipelined_cells waiting cells).
  std::chrono::steady_clock::time_point last_start_ GUARDED_BY(mu_);
  bool pacing_ GUARDED_BY(mu_) = false;
  // Cells submitted so far, and per recently finished transaction (one bit
  // each, newest lowest, the last 4) whether any cells were submitted while
  // it ran (PutsArriveDuringCommits).
  uint64_t submitted_cells_ GUARDED_BY(mu_) = 0;
  unsigned some_arrived_ GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;

  // Hands `answers` (each unit with its transaction's outcome; OK: its
  // results are filled) to the answering thread, which tells their
  // completions in order. Any thread.
  void Answer(std::vector<std::pair<WriteUnit*, Status>> answers);
  // The answering thread: tells completions until Stop() and nothing is left.
  void AnswerLoop();
  Mutex answer_mu_;
  CondVar answer_cv_;
  std::vector<std::pair<WriteUnit*, Status>> answers_ GUARDED_BY(answer_mu_);
  bool answer_stop_ GUARDED_BY(answer_mu_) = false;
  std::thread answerer_;
};

}  // namespace cellar::internal
