// GroupCommitter: the per-host writer of the group commit.
//
// Units are queued per (datastore, shard). A fixed pool of writer threads, each
// with its own MySQL connection, takes every queue of the host that is not
// being committed by another thread (up to max_batch_cells cells in all) and
// commits them as ONE transaction: per shard a commit_order lock and one
// multi-row INSERT ... RETURNING, then a single COMMIT (one fsync). While one
// batch commits, new arrivals accumulate into the next, so batches grow with
// load (the Tera tablet-writer idea).
//
// Threading: Submit() is thread-safe. The destructor stops the threads and
// fails still-queued units with Unavailable.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cells/internal/batch_transaction.h"
#include "cells/internal/write_unit.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

struct GroupCommitterOptions {
  int threads = 4;
  int max_batch_cells = 256;
  std::string database_prefix = "cellar";
};

class GroupCommitter {
 public:
  GroupCommitter(MysqlEndpoint endpoint, GroupCommitterOptions options);
  ~GroupCommitter();

  // Queues `unit`; its `done` promise is set once its results are final.
  // REQUIRES: unit outlives the promise being set; unit->cells not empty.
  void Submit(WriteUnit* unit);

  // Fails queued units and joins the threads. Idempotent.
  void Stop();

 private:
  using QueueKey = std::pair<std::string, uint32_t>;  // (datastore, shard)

  void WriterLoop();
  // Commits `batches` (one transaction for the free shards, then one per busy
  // shard) and answers every unit.
  void CommitBatches(std::unique_ptr<MysqlConnection>& conn, std::vector<ShardBatch>& batches);
  // Marks the answered `done` shards not busy; queues with new units become ready.
  void Release(const std::vector<ShardBatch*>& done);
  // RunGroupTransaction with reconnects and deadlock/lock-timeout retries.
  Status CommitWithRetries(std::unique_ptr<MysqlConnection>& conn,
                           std::vector<ShardBatch*>& batches, std::vector<ShardBatch*>* busy);

  const MysqlEndpoint endpoint_;
  const GroupCommitterOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<QueueKey, std::deque<WriteUnit*>> queues_;
  std::deque<QueueKey> ready_;  // queues with work that no thread is committing
  std::set<QueueKey> busy_;     // queues a thread is committing now
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace cellar::internal
