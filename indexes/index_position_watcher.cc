#include "indexes/index_position_watcher.h"

#include <algorithm>

#include "indexes/index_positions.h"

namespace cellar {
namespace {

constexpr int kMinPauseMs = 1;   // between reads while callers arrive or positions move
constexpr int kMaxPauseMs = 20;  // between reads for a worker that is behind

}  // namespace

Result<std::vector<std::pair<uint32_t, uint64_t>>> IndexPositionWatcher::ReadPositions(
    size_t host, const std::string& datastore) {
  const ClusterConfig& cfg = store_->config();
  reads_.fetch_add(1, std::memory_order_relaxed);
  CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(host).Acquire());
  return ReadIndexPositions(*lease, cfg.HostDatabase(cfg.mysql.hosts[host]), datastore);
}

Status IndexPositionWatcher::Wait(const std::string& datastore, uint32_t shard, uint64_t added_id,
                                  int timeout_ms) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  const size_t host = store_->config().HostIndexForShard(shard);
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
    if (source.rounds > arrived_at_round && !source.last_read.ok()) return source.last_read;
    const Clock::time_point now = Clock::now();
    if (now >= deadline)
      return DeadlineExceeded("the index worker has applied shard " + std::to_string(shard) +
                              " of " + datastore + " up to position " + std::to_string(applied()) +
                              ", not yet " + std::to_string(added_id) + ", after " +
                              std::to_string(timeout_ms) + " ms");
    if (source.reading || now < source.next_read) {
      read_done_.WaitUntil(&mu_, source.reading ? deadline : std::min(deadline, source.next_read));
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
