#include "indexes/index_position_watcher.h"

#include <algorithm>

#include "indexes/index_positions.h"

namespace cellar {
namespace {

constexpr int kMinPauseMs = 1;   // between reads while callers arrive or positions move
constexpr int kMaxPauseMs = 20;  // between reads for a worker that is behind

}  // namespace

IndexPositionWatcher::IndexPositionWatcher(CellStore* store, MetricsRegistry* metrics)
    : store_(store) {
  if (!metrics) return;
  const std::string waits = "cellar_index_position_waits_total";
  const std::string waits_help =
      "Index queries given a position token (after=), by how their wait for the index worker "
      "ended";
  applied_ = &metrics->GetCounter(waits, waits_help, {{"outcome", "applied"}});
  timed_out_ = &metrics->GetCounter(waits, waits_help, {{"outcome", "timed_out"}});
  failed_ = &metrics->GetCounter(waits, waits_help, {{"outcome", "failed"}});
  reads_counter_ = &metrics->GetCounter(
      "cellar_index_position_reads_total",
      "Reads of index_positions sent for waiting index queries (one per host, shared)");
  waited_ = &metrics->GetHistogram(
      "cellar_index_position_wait_seconds",
      "How long index queries given a position token waited until it was applied");
}

Status IndexPositionWatcher::Wait(const std::string& datastore, uint32_t shard, uint64_t added_id,
                                  int timeout_ms) {
  const Clock::time_point began = Clock::now();
  Status st = WaitUntilApplied(datastore, shard, added_id, timeout_ms);
  if (applied_) {
    if (st.ok()) {
      applied_->Increment();
      waited_->Observe(std::chrono::duration<double>(Clock::now() - began).count());
    } else if (st.code() == StatusCode::kDeadlineExceeded) {
      timed_out_->Increment();
    } else {
      failed_->Increment();
    }
  }
  return st;
}

Result<std::vector<std::pair<uint32_t, uint64_t>>> IndexPositionWatcher::ReadPositions(
    size_t host, const std::string& datastore) {
  const ClusterConfig& cfg = store_->config();
  reads_.fetch_add(1, std::memory_order_relaxed);
  if (reads_counter_) reads_counter_->Increment();
  CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(host).Acquire());
  return ReadIndexPositions(*lease, cfg.HostDatabase(cfg.mysql.hosts[host]), datastore);
}

Status IndexPositionWatcher::WaitUntilApplied(const std::string& datastore, uint32_t shard,
                                              uint64_t added_id, int timeout_ms) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  const size_t host = store_->HostOfShard(shard);
  MutexLock lock(&mu_);
  Source& source = sources_[{host, datastore}];  // map nodes stay put
  auto applied = [&]() REQUIRES(mu_) {
    auto it = source.applied.find(shard);
    return it == source.applied.end() ? uint64_t{0} : it->second;
  };
  if (applied() >= added_id) return Status::Ok();
  // A new caller brings the next read forward (to 1 ms after the last began).
  source.pause_ms = kMinPauseMs;
  source.next_read =
      std::min(source.next_read, source.last_started + std::chrono::milliseconds(kMinPauseMs));
  const uint64_t arrived_at_round = source.rounds;
  while (true) {
    if (applied() >= added_id) return Status::Ok();
    // Every caller gets at least one read that ends after it arrived, so a
    // short (even zero) timeout still answers from the database.
    const bool seen_a_read = source.rounds > arrived_at_round;
    if (seen_a_read && !source.last_read.ok()) return source.last_read;
    const Clock::time_point now = Clock::now();
    const bool past_deadline = now >= deadline;
    if (past_deadline && seen_a_read)
      return DeadlineExceeded("the index worker has applied shard " + std::to_string(shard) +
                              " of " + datastore + " up to position " + std::to_string(applied()) +
                              ", not yet " + std::to_string(added_id) + ", after " +
                              std::to_string(timeout_ms) + " ms");
    if (source.reading) {
      if (past_deadline) {
        read_done_.Wait(&mu_);  // that read is this caller's last
      } else {
        read_done_.WaitUntil(&mu_, deadline);
      }
      continue;
    }
    if (!past_deadline && now < source.next_read) {
      read_done_.WaitUntil(&mu_, std::min(deadline, source.next_read));
      continue;
    }
    // This caller reads for everyone waiting on the source.
    source.reading = true;
    source.last_started = now;
    lock.Unlock();
    auto read = ReadPositions(host, datastore);
    lock.Lock();
    bool moved = false;
    if (read.ok()) {
      for (const auto& [s, position] : *read) {
        uint64_t& known = source.applied[s];
        if (position > known) {
          known = position;
          moved = true;
        }
      }
    }
    source.last_read = read.ok() ? Status::Ok() : read.status();
    source.rounds++;
    source.reading = false;
    source.pause_ms = moved ? kMinPauseMs : std::min(kMaxPauseMs, source.pause_ms * 2);
    source.next_read = source.last_started + std::chrono::milliseconds(source.pause_ms);
    read_done_.NotifyAll();
  }
}

}  // namespace cellar
