#include "changelog/relay.h"

#include "base/thread_name.h"
#include "cells/host_topology.h"
#include "changelog/internal/relay_impl.h"
#include "changelog/internal/relay_pacing.h"

namespace cellar {

std::string RelayLockName(const std::string& host_database, const std::string& datastore) {
  std::string name = "cellar_relay:" + host_database + "/" + datastore;
  if (name.size() <= 64) return name;
  // Too long for MariaDB: a hash keeps distinct streams distinct.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "cellar_relay:" + name.substr(13, 34) + "~" + hex;
}

std::vector<std::string> RelayTransactionalIds(const ClusterConfig& config,
                                               const std::string& host_database,
                                               const std::string& datastore) {
  const std::string id = config.kafka.topic_prefix + ".relay." + host_database + "." + datastore;
  return {id, id + ".1"};
}

// After a read at `round` that handed `produced` cells on: a full page means
// a backlog (read on at once); a partial one, a trickle (wait TrickleWaitMs,
// so it is read in pages of several cells, not one query and one transaction
// per cell); nothing, an idle stream (wait, doubling from poll_min_ms up to
// poll_max_ms).
void Relay::Impl::ScheduleNextRead(HostStream& s, size_t produced,
                                   std::chrono::steady_clock::time_point round) {
  const int min_ms = std::max(1, config.relay.poll_min_ms);
  // The time the cells of this read had to gather (none known on the first).
  const auto gathered =
      s.last_read == std::chrono::steady_clock::time_point{}
          ? std::chrono::milliseconds(0)
          : std::chrono::duration_cast<std::chrono::milliseconds>(round - s.last_read);
  s.last_read = round;
  if (produced == 0) {
    const int wait_ms = s.idle_ms > 0 ? s.idle_ms : min_ms;
    s.next_read = round + std::chrono::milliseconds(wait_ms);
    s.idle_ms = std::min(wait_ms * 2, std::max(min_ms, config.relay.poll_max_ms));
    return;
  }
  s.idle_ms = 0;
  const bool full = produced >= static_cast<size_t>(std::max(1, config.relay.batch_cells));
  s.next_read = full ? round
                     : round + std::chrono::milliseconds(
                                   internal::TrickleWaitMs(config.relay, produced, gathered));
}

void Relay::Impl::HostLoop(size_t host_index) {
  const MysqlHostConfig& host = config.mysql.hosts[host_index];
  const std::string db = config.HostDatabase(host);
  TopologyView& topology = store->topology();
  NamedLocks locks([&topology, host_index] { return topology.ConnectPrimary(host_index); });
  // The stream locks live on the host's primary: a failover moves them.
  uint64_t lock_epoch = topology.Current(host_index).epoch;
  std::vector<std::string> mine;  // lock names of the streams of this host this relay owns
  auto next_ownership = std::chrono::steady_clock::now();
  const size_t n = config.datastores.size();
  const size_t rotate = std::hash<std::string>{}(relay_id) % std::max<size_t>(n, 1);

  auto lose_all = [&](const std::string& why) {
    if (!mine.empty())
      LogWarn("relay", "lost stream locks",
              {{"host", host.name}, {"reason", why}, {"streams", std::to_string(mine.size())}});
    for (const auto& name : mine) DropStream(name, /*flush=*/false);
    owned_total -= static_cast<int>(mine.size());
    mine.clear();
    locks.Disconnect();
  };

  while (!stopping) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_ownership) {
      next_ownership = now + std::chrono::milliseconds(config.relay.lock_retry_ms);
      if (!mine.empty() && !locks.Ping().ok()) lose_all("lock connection broke");
      if (const uint64_t epoch = topology.Current(host_index).epoch; epoch != lock_epoch) {
        lose_all("the host's primary changed (topology epoch " + std::to_string(epoch) + ")");
        lock_epoch = epoch;
      }
      const int target = TargetShare();
      // Host threads share owned_total: a slot is taken (or given back) with
      // one compare-and-swap, so two threads never both pass the target.
      auto take_slot = [&] {
        int cur = owned_total.load();
        while (cur < target)
          if (owned_total.compare_exchange_weak(cur, cur + 1)) return true;
        return false;
      };
      auto give_back_extra = [&] {
        int cur = owned_total.load();
        while (cur > target)
          if (owned_total.compare_exchange_weak(cur, cur - 1)) return true;
        return false;
      };
      while (!mine.empty() && give_back_extra()) {
        std::string name = mine.back();
        mine.pop_back();
        DropStream(name, /*flush=*/true);
        locks.Release(name).IgnoreError();
        LogInfo("relay", "released stream to rebalance",
                {{"stream", name}, {"host", host.name}, {"relay", relay_id}});
      }
      for (size_t i = 0; i < n && !stopping; ++i) {
        const std::string& ds = config.datastores[(i + rotate) % n].name;
        const std::string name = RelayLockName(db, ds);
        if (std::find(mine.begin(), mine.end(), name) != mine.end()) continue;
        if (!take_slot()) break;
        auto got = locks.TryAcquire(name);
        if (!got.ok() || !*got) owned_total--;  // the slot goes back
        if (!got.ok()) {
          lose_all(got.status().message());
          break;
        }
        if (!*got) continue;
        if (Status st = AdoptStream(host_index, ds); !st.ok()) {
          owned_total--;
          locks.Release(name).IgnoreError();
          LogWarn("relay", "cannot adopt stream",
                  {{"host", host.name}, {"datastore", ds}, {"error", st.ToString()}});
          break;
        }
        mine.push_back(name);
        LogInfo("relay", "owns stream",
                {{"host", host.name}, {"datastore", ds}, {"relay", relay_id}});
      }
    }
    if (mine.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // nothing owned: wait a round
      continue;
    }
    // Each stream is read when its own schedule says so (ScheduleNextRead);
    // the thread sleeps until the first stream is due.
    const auto round = std::chrono::steady_clock::now();
    auto wake = round + std::chrono::milliseconds(config.relay.poll_max_ms);
    for (const auto& name : mine) {
      auto s = Stream(name);
      if (!s) continue;
      if (round >= s->next_read) ScheduleNextRead(*s, Pump(s), round);
      wake = std::min(wake, s->next_read);
    }
    for (size_t i = 0; i < mine.size();) {
      auto s = Stream(mine[i]);
      if (!s || !s->fenced) {
        ++i;
        continue;
      }
      // Another relay claimed the stream: this one publishes nothing more of it.
      LogWarn("relay", "fenced: another relay claimed the stream; dropping it",
              {{"host", host.name}, {"datastore", s->datastore}, {"relay", relay_id}});
      DropStream(mine[i], /*flush=*/false);
      locks.Release(mine[i]).IgnoreError();
      owned_total--;
      mine.erase(mine.begin() + static_cast<long>(i));
      // Counted once dropped: stats() never shows a fenced stream as still owned.
      fenced++;
      if (probe) probe->StreamsFenced().Increment();
    }
    wake = std::min(wake, next_ownership);
    if (wake > std::chrono::steady_clock::now()) std::this_thread::sleep_until(wake);
  }
  // Shutdown: flush and save what this thread owns, then let the locks go.
  for (const auto& name : mine) {
    DropStream(name, /*flush=*/true);
    locks.Release(name).IgnoreError();
  }
  owned_total -= static_cast<int>(mine.size());
}

Relay::Relay(CellStore* store, std::string relay_id, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(store, std::move(relay_id), metrics)) {}

Relay::~Relay() { Stop(); }

Status Relay::Start() {
  Impl& m = *impl_;
  if (Status layout = m.store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  m.total_streams = m.config.mysql.hosts.size() * m.config.datastores.size();
  {
    WriterMutexLock lock(&m.producer_mu);  // no other thread yet
    CELLAR_ASSIGN_OR_RETURN(m.producer, m.MakeProducer());
    for (const auto& ds : m.config.datastores)
      CELLAR_RETURN_IF_ERROR(m.producer->EnsureTopic(ChangeLogTopic(m.config.kafka, ds.name),
                                                     m.config.kafka.partitions, kKafkaTimeoutMs));
  }
  m.CheckAllCheckpoints();
  TopologyView* topology = &m.store->topology();
  m.membership = std::make_unique<RelayMembership>(
      [topology] { return topology->ConnectPrimary(0); }, m.config.mysql.database_prefix);
  m.poll_thread = NamedThread("relay-acks", [&m] { m.PollLoop(); });
  m.checkpoint_thread = NamedThread("relay-checkpt", [&m] { m.CheckpointLoop(); });
  if (m.probe) m.metrics_thread = NamedThread("relay-metrics", [&m] { m.MetricsLoop(); });
  for (size_t h = 0; h < m.config.mysql.hosts.size(); ++h)
    m.host_threads.push_back(
        NamedThread("relay-host" + std::to_string(h), [&m, h] { m.HostLoop(h); }));
  LogInfo("relay", "started", {{"relay", m.relay_id}, {"brokers", m.config.kafka.brokers}});
  return Status::Ok();
}

void Relay::Stop() {
  Impl& m = *impl_;
  bool started;
  {
    // The poll thread may be replacing the producer (ReplaceProducer).
    ReaderMutexLock lock(&m.producer_mu);
    started = m.producer != nullptr;
  }
  if (!started || m.stopping.exchange(true)) return;
  // Host threads flush through the poll thread's delivery reports, so stop them first.
  for (auto& t : m.host_threads) t.join();
  m.host_threads.clear();
  {
    MutexLock lock(&m.checkpoint_mu);
    m.stop_checkpoints = true;
  }
  m.checkpoint_cv.NotifyAll();
  if (m.checkpoint_thread.joinable()) m.checkpoint_thread.join();
  if (m.metrics_thread.joinable()) m.metrics_thread.join();
  m.stop_polling = true;
  if (m.poll_thread.joinable()) m.poll_thread.join();
  {
    WriterMutexLock lock(&m.producer_mu);                // every other user is joined
    m.producer->Flush(kFlushOnReleaseMs).IgnoreError();  // what is left is purged
    m.producer->PurgeAll();
  }
  if (m.membership) m.membership->Leave();
  LogInfo("relay", "stopped",
          {{"relay", m.relay_id}, {"published", std::to_string(m.published.load())}});
}

RelayStats Relay::stats() const {
  RelayStats s;
  s.published = impl_->published;
  s.acknowledged = impl_->callbacks.acknowledged;
  s.rewinds = impl_->rewinds;
  s.republished_after_broker_loss = impl_->resets;
  s.fenced = impl_->fenced;
  s.skipped_already_published = impl_->skipped_already_published;
  s.positions_reused_after_loss = impl_->lost_then_reused;
  s.failed_fenced_batches = impl_->fenced_batches;
  s.replaced_producers = impl_->replaced_producers;
  s.transactions = impl_->transactions;
  MutexLock g(&impl_->streams_mu);
  for (const auto& [name, stream] : impl_->owned)
    s.owned_streams.push_back(stream->host_name + "/" + stream->datastore);
  return s;
}

}  // namespace cellar
