#include "cells/internal/group_committer.h"

#include "base/log.h"
#include "cells/internal/batch_transaction.h"

namespace cellar::internal {
namespace {

void Finish(WriteUnit* u, const Status& error) {
  if (!error.ok()) {
    u->results.clear();
    for (size_t i = 0; i < u->cells.size(); ++i) u->results.emplace_back(error);
  }
  u->done.set_value();
}

constexpr int kDeadlockRetries = 3;

}  // namespace

GroupCommitter::GroupCommitter(MysqlEndpoint endpoint, GroupCommitterOptions options)
    : endpoint_(std::move(endpoint)), options_(std::move(options)) {
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { WriterLoop(); });
}

GroupCommitter::~GroupCommitter() { Stop(); }

void GroupCommitter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, q] : queues_)
    for (WriteUnit* u : q) Finish(u, Unavailable("the cell store is closing"));
  queues_.clear();
  ready_.clear();
}

void GroupCommitter::Submit(WriteUnit* unit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      Finish(unit, Unavailable("the cell store is closed"));
      return;
    }
    QueueKey key{unit->datastore, unit->shard};
    auto& q = queues_[key];
    q.push_back(unit);
    if (q.size() == 1 && !busy_.count(key)) ready_.push_back(key);
  }
  cv_.notify_one();
}

void GroupCommitter::WriterLoop() {
  std::unique_ptr<MysqlConnection> conn;
  while (true) {
    // Take every queue that is ready (up to max_batch_cells cells in all):
    // one transaction, one fsync, for all of this host's waiting shards.
    std::vector<ShardBatch> batches;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      size_t cells = 0;
      while (!ready_.empty() && cells < static_cast<size_t>(options_.max_batch_cells)) {
        QueueKey key = ready_.front();
        ready_.pop_front();
        busy_.insert(key);
        auto& q = queues_[key];
        ShardBatch b;
        b.shard = key.second;
        b.datastore = key.first;
        while (!q.empty() &&
               (b.units.empty() ||
                cells + q.front()->cells.size() <= static_cast<size_t>(options_.max_batch_cells))) {
          cells += q.front()->cells.size();
          b.units.push_back(q.front());
          q.pop_front();
        }
        batches.push_back(std::move(b));
      }
    }
    CommitBatches(conn, batches);
  }
}

void GroupCommitter::Release(const std::vector<ShardBatch*>& done) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ShardBatch* b : done) {
    QueueKey key{b->datastore, b->shard};
    busy_.erase(key);
    // Empty queues stay: there is at most one per (datastore, shard) of the
    // host, and dropping one would cost a deque allocation on the next put.
    auto it = queues_.find(key);
    if (it != queues_.end() && !it->second.empty()) {
      ready_.push_back(key);
      cv_.notify_one();
    }
  }
}

void GroupCommitter::CommitBatches(std::unique_ptr<MysqlConnection>& conn,
                                   std::vector<ShardBatch>& batches) {
  auto answer = [](const std::vector<ShardBatch*>& done, const Status& status) {
    for (ShardBatch* b : done) {
      Status mine = status.ok() ? status
                                : Status(status.code(), "shard " + std::to_string(b->shard) + ": " +
                                                            status.message());
      for (WriteUnit* u : b->units) Finish(u, mine);
    }
  };
  std::vector<ShardBatch*> free_shards;
  for (auto& b : batches) free_shards.push_back(&b);
  std::vector<ShardBatch*> busy;
  // Answer this transaction's callers, and let other threads take their
  // shards again, before waiting for busy shards: a shard's later writes must
  // not queue behind another shard's held lock.
  answer(free_shards, CommitWithRetries(conn, free_shards, &busy));
  Release(free_shards);
  // Shards whose commit lock another writer held: one at a time, waiting.
  for (ShardBatch* b : busy) {
    std::vector<ShardBatch*> one{b}, none;
    answer(one, CommitWithRetries(conn, one, &none));
    Release(one);
  }
}

Status GroupCommitter::CommitWithRetries(std::unique_ptr<MysqlConnection>& conn,
                                         std::vector<ShardBatch*>& batches,
                                         std::vector<ShardBatch*>* busy) {
  Status status;
  const std::vector<ShardBatch*> original = batches;
  for (int attempt = 0; attempt <= kDeadlockRetries; ++attempt) {
    batches = original;
    busy->clear();
    bool fresh = false;
    if (!conn || conn->broken()) {
      fresh = true;
      conn.reset();
      auto c = MysqlConnection::Connect(endpoint_);
      if (!c.ok()) {
        status = Unavailable(c.status().message());
        break;
      }
      conn = std::move(c).value();
      // Every group transaction ends in COMMIT or ROLLBACK: no BEGIN needed.
      if (Status st = conn->UseImplicitTransactions(); !st.ok()) {
        conn.reset();
        status = Unavailable(st.message());
        break;
      }
    }
    status = RunGroupTransaction(*conn, options_.database_prefix, batches, busy);
    if (status.ok()) break;
    if (status.code() == StatusCode::kUnavailable) {
      // A pooled connection may have gone stale (server restarted): retry once
      // on a fresh one. If the lost COMMIT did happen, the retry finds the
      // identical cells and succeeds (writes are idempotent by address).
      if (!fresh) continue;
      break;
    }
    if (status.code() != StatusCode::kAborted) break;  // deadlocks and lock timeouts retry
  }
  if (!status.ok()) {
    batches = original;
    busy->clear();
    std::string shards;
    size_t units = 0;
    for (const auto* b : batches) {
      if (!shards.empty()) shards += ',';
      shards += std::to_string(b->shard);
      units += b->units.size();
    }
    LogWarn("group_commit", "batch failed",
            {{"shards", shards}, {"units", std::to_string(units)}, {"error", status.ToString()}});
  }
  return status;
}

}  // namespace cellar::internal
