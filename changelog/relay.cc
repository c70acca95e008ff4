#include "changelog/relay.h"

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "base/log.h"
#include "changelog/cell_event.h"
#include "changelog/internal/relay_ownership.h"
#include "changelog/internal/shard_stream.h"
#include "changelog/kafka_conf.h"
#include "changelog/relay_checkpoint.h"

namespace cellar {

using internal::DeliveryTag;
using internal::NamedLocks;
using internal::RelayMembership;
using internal::ShardStream;

std::string RelayLockName(const std::string& shard_database) {
  std::string name = "cellar_relay:" + shard_database;
  return name.size() <= 64 ? name : name.substr(0, 64);
}

namespace {

constexpr int kKafkaTimeoutMs = 5000;
constexpr size_t kMaxInFlightPerStream = 20000;
constexpr int kSaveIntervalMs = 100;
constexpr int kFlushOnReleaseMs = 5000;

class RelayCallbacks : public RdKafka::DeliveryReportCb, public RdKafka::EventCb {
 public:
  std::atomic<uint64_t> acknowledged{0};
  std::atomic<bool> outage{false};
  std::atomic<bool> fatal{false};
  std::string relay_id;

  void dr_cb(RdKafka::Message& m) override {
    auto* tag = static_cast<DeliveryTag*>(m.msg_opaque());
    if (!tag) return;
    if (m.err() == RdKafka::ERR_NO_ERROR) {
      tag->stream->OnDelivered(tag->generation, tag->added_id, m.offset());
      acknowledged.fetch_add(1, std::memory_order_relaxed);
      if (outage.exchange(false))
        LogInfo("relay", "Kafka reachable again; catching up", {{"relay", relay_id}});
    } else {
      tag->stream->OnFailed(tag->generation);
    }
    delete tag;
  }

  void event_cb(RdKafka::Event& e) override {
    if (e.type() != RdKafka::Event::EVENT_ERROR) return;
    if (e.fatal()) {
      fatal = true;
      LogError("relay", "Kafka producer fatal error", {{"error", e.str()}, {"relay", relay_id}});
      return;
    }
    if (e.err() == RdKafka::ERR__ALL_BROKERS_DOWN || e.err() == RdKafka::ERR__TRANSPORT) {
      if (!outage.exchange(true))
        LogWarn("relay", "Kafka unreachable; writes continue, publishing retries",
                {{"error", e.str()}, {"relay", relay_id}});
    }
  }
};

}  // namespace

struct Relay::Impl {
  CellStore* store;
  std::string relay_id;
  const ClusterConfig& config;
  RelayCallbacks callbacks;
  std::shared_mutex producer_mu;  // exclusive only while replacing the producer
  std::unique_ptr<RdKafka::Producer> producer;
  std::unique_ptr<RelayMembership> membership;
  std::atomic<bool> stopping{false};      // host threads stop
  std::atomic<bool> stop_polling{false};  // delivery reports stop (after host threads)
  std::atomic<int> owned_total{0};
  std::atomic<uint64_t> published{0}, rewinds{0}, resets{0};
  std::thread poll_thread;
  std::thread checkpoint_thread;
  std::mutex checkpoint_mu;
  std::condition_variable checkpoint_cv;
  bool stop_checkpoints = false;  // guarded by checkpoint_mu
  std::vector<std::thread> host_threads;

  std::mutex streams_mu;
  std::map<uint32_t, std::vector<std::shared_ptr<ShardStream>>> owned;  // shard -> streams

  Impl(CellStore* s, std::string id) : store(s), relay_id(std::move(id)), config(s->config()) {
    callbacks.relay_id = relay_id;
  }

  Result<std::unique_ptr<RdKafka::Producer>> MakeProducer() {
    CELLAR_ASSIGN_OR_RETURN(
        auto conf, MakeKafkaConf(config.kafka, {{"enable.idempotence", "true"},
                                                {"acks", "all"},
                                                {"linger.ms", "1"},
                                                {"message.timeout.ms", "30000"},
                                                {"queue.buffering.max.messages", "1000000"},
                                                {"allow.auto.create.topics", "false"},
                                                {"client.id", "cellar-relay-" + relay_id}}));
    std::string err;
    conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(&callbacks), err);
    conf->set("event_cb", static_cast<RdKafka::EventCb*>(&callbacks), err);
    std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
    if (!p) return InvalidArgument("Kafka producer: " + err);
    return p;
  }

  void PollLoop() {
    while (!stop_polling) {
      {
        std::shared_lock<std::shared_mutex> lock(producer_mu);
        producer->poll(50);
      }
      if (callbacks.fatal.exchange(false)) ReplaceProducer();
    }
  }

  // After a fatal producer error: every stream rewinds to what Kafka
  // acknowledged and a new producer republishes from there.
  void ReplaceProducer() {
    std::unique_lock<std::shared_mutex> lock(producer_mu);
    {
      std::lock_guard<std::mutex> g(streams_mu);
      for (auto& [shard, streams] : owned)
        for (auto& s : streams) s->Rewind();
    }
    producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
    producer->poll(0);  // frees the purged records' tags (stale generation: ignored)
    auto p = MakeProducer();
    if (p.ok()) producer = std::move(p).value();
    rewinds++;
  }

  std::vector<std::shared_ptr<ShardStream>> Streams(uint32_t shard) {
    std::lock_guard<std::mutex> g(streams_mu);
    auto it = owned.find(shard);
    return it == owned.end() ? std::vector<std::shared_ptr<ShardStream>>{} : it->second;
  }

  // True when the broker no longer has the record the checkpoint says was
  // acknowledged (the partition ends at or before its offset): the broker lost
  // events, e.g. the local in-memory broker restarted. Resets the checkpoint.
  Result<bool> ResetIfBrokerLost(MysqlConnection& conn, uint32_t shard,
                                 const std::string& datastore, RelayCheckpoint* cp) {
    if (cp->after_added_id == 0 || cp->kafka_offset < 0) return false;
    const std::string topic = ChangeLogTopic(config.kafka, datastore);
    const int32_t partition = ChangeLogPartition(config.kafka, shard);
    int64_t high;
    {
      std::shared_lock<std::shared_mutex> lock(producer_mu);
      CELLAR_ASSIGN_OR_RETURN(
          high, PartitionHighWatermark(producer.get(), topic, partition, kKafkaTimeoutMs));
    }
    if (high > cp->kafka_offset) return false;
    LogWarn("relay",
            "broker has fewer records than the checkpoint says were published; "
            "republishing the shard from the beginning",
            {{"shard", std::to_string(shard)},
             {"datastore", datastore},
             {"checkpoint", std::to_string(cp->after_added_id)},
             {"checkpoint_offset", std::to_string(cp->kafka_offset)},
             {"partition_end", std::to_string(high)}});
    CELLAR_RETURN_IF_ERROR(ResetCheckpoint(conn, config.ShardDatabase(shard), datastore));
    *cp = RelayCheckpoint{};
    resets++;
    return true;
  }

  // Before publishing anything: find every shard whose checkpoint the broker
  // cannot back, so that no relay's first records hide an older loss behind a
  // grown partition end. Unreachable shards are checked again on adoption.
  void CheckAllCheckpoints() {
    for (uint32_t shard = 0; shard < config.shards; ++shard) {
      auto lease = store->PoolForShard(shard).Acquire();
      if (!lease.ok()) continue;
      const std::string db = config.ShardDatabase(shard);
      if (!EnsureCheckpointTable(**lease, db).ok()) continue;
      for (const auto& ds : config.datastores) {
        auto cp = LoadCheckpoint(**lease, db, ds.name);
        if (cp.ok()) ResetIfBrokerLost(**lease, shard, ds.name, &*cp).status().IgnoreError();
      }
    }
  }

  // Loads checkpoints of a newly locked shard and checks that the broker still
  // has what the checkpoint claims was published.
  Status AdoptShard(uint32_t shard) {
    const std::string db = config.ShardDatabase(shard);
    auto lease = store->PoolForShard(shard).Acquire();
    if (!lease.ok()) return lease.status();
    CELLAR_RETURN_IF_ERROR(EnsureCheckpointTable(**lease, db));
    std::vector<std::shared_ptr<ShardStream>> streams;
    for (const auto& ds : config.datastores) {
      auto s = std::make_shared<ShardStream>();
      s->shard = shard;
      s->datastore = ds.name;
      s->database = db;
      s->topic = ChangeLogTopic(config.kafka, ds.name);
      s->partition = ChangeLogPartition(config.kafka, shard);
      CELLAR_ASSIGN_OR_RETURN(RelayCheckpoint cp, LoadCheckpoint(**lease, db, ds.name));
      CELLAR_RETURN_IF_ERROR(ResetIfBrokerLost(**lease, shard, ds.name, &cp).status());
      s->read_pos = s->acked = s->saved = cp.after_added_id;
      s->acked_offset = cp.kafka_offset;
      streams.push_back(std::move(s));
    }
    std::lock_guard<std::mutex> g(streams_mu);
    owned[shard] = std::move(streams);
    return Status::Ok();
  }

  // The checkpoint `s` should have, if it is ahead of what is saved.
  static std::optional<RelayCheckpoint> Unsaved(ShardStream& s) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.acked <= s.saved) return std::nullopt;
    return RelayCheckpoint{s.acked, s.acked_offset, NowMicros()};
  }
  static void MarkSaved(ShardStream& s, uint64_t acked) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.saved = std::max(s.saved, acked);
  }

  void SaveStream(ShardStream& s) {
    std::optional<RelayCheckpoint> cp = Unsaved(s);
    if (!cp) return;
    auto lease = store->PoolForShard(s.shard).Acquire();
    if (!lease.ok()) return;
    if (SaveCheckpoint(**lease, s.database, s.datastore, *cp).ok())
      MarkSaved(s, cp->after_added_id);
  }

  // Saves the checkpoints of every owned stream of one host that moved, in one
  // transaction (one log flush instead of one per shard); on any failure falls
  // back to saving them one by one, so one bad shard database cannot hold the
  // others back. Checkpoints are monotonic (SaveCheckpoint never moves one
  // back), so racing with a DropShard save of the same stream is harmless.
  void SaveHost(std::vector<std::shared_ptr<ShardStream>>& streams) {
    std::vector<std::pair<ShardStream*, RelayCheckpoint>> moved;
    for (auto& s : streams)
      if (auto cp = Unsaved(*s)) moved.emplace_back(s.get(), *cp);
    if (moved.empty()) return;
    if (moved.size() > 1) {
      auto lease = store->PoolForShard(moved.front().first->shard).Acquire();
      if (lease.ok()) {
        MysqlConnection& conn = **lease;
        Status st = conn.Begin();
        for (size_t i = 0; st.ok() && i < moved.size(); ++i)
          st = SaveCheckpoint(conn, moved[i].first->database, moved[i].first->datastore,
                              moved[i].second);
        if (st.ok()) st = conn.Commit();
        if (st.ok()) {
          for (auto& [s, cp] : moved) MarkSaved(*s, cp.after_added_id);
          return;
        }
        conn.Rollback();
      }
    }
    for (auto& [s, cp] : moved) SaveStream(*s);
  }

  // Saves checkpoints every kSaveIntervalMs on its own thread, so that log
  // flushes never delay publishing.
  void CheckpointLoop() {
    std::unique_lock<std::mutex> lock(checkpoint_mu);
    while (!stop_checkpoints) {
      checkpoint_cv.wait_for(lock, std::chrono::milliseconds(kSaveIntervalMs));
      lock.unlock();
      std::map<const void*, std::vector<std::shared_ptr<ShardStream>>> by_host;
      {
        std::lock_guard<std::mutex> g(streams_mu);
        for (auto& [shard, streams] : owned)
          for (auto& st : streams) by_host[&store->PoolForShard(shard)].push_back(st);
      }
      for (auto& [host, streams] : by_host) SaveHost(streams);
      lock.lock();
    }
  }

  // Flushes, saves and forgets a shard (its lock is released by the caller).
  void DropShard(uint32_t shard, bool flush) {
    auto streams = Streams(shard);
    if (flush) {
      auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(kFlushOnReleaseMs);
      for (auto& s : streams) {
        while (std::chrono::steady_clock::now() < deadline) {
          {
            std::lock_guard<std::mutex> lock(s->mu);
            if (s->inflight.empty()) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waiting on delivery reports
        }
        SaveStream(*s);
      }
    }
    std::lock_guard<std::mutex> g(streams_mu);
    owned.erase(shard);
  }

  // Reads new cells of the stream and hands them to the producer. Returns the count.
  size_t Pump(const std::shared_ptr<ShardStream>& sp, uint64_t head) {
    ShardStream& s = *sp;
    bool failed;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      failed = s.failed;
    }
    if (failed) {
      s.Rewind();
      rewinds++;
      LogWarn("relay", "delivery failed; rewinding shard to its acknowledged position",
              {{"shard", std::to_string(s.shard)}, {"datastore", s.datastore}});
    }
    uint64_t after, gen;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (head <= s.read_pos || s.inflight.size() >= kMaxInFlightPerStream) return 0;
      after = s.read_pos;
      gen = s.generation;
    }
    auto page = store->ShardLog(s.datastore, s.shard, after, config.relay.batch_cells);
    if (!page.ok()) return 0;
    size_t produced = 0;
    std::shared_lock<std::shared_mutex> plock(producer_mu);
    for (const Cell& c : page->cells) {
      std::string value = EncodeCellEvent(s.datastore, c, config.kafka.max_event_body_bytes);
      std::string key = c.row_key.ToString();
      {
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.generation != gen) break;  // rewound meanwhile
        s.inflight.push_back({c.added_id, false, -1});
      }
      auto* tag = new DeliveryTag{sp, gen, c.added_id};
      RdKafka::ErrorCode err =
          producer->produce(s.topic, s.partition, RdKafka::Producer::RK_MSG_COPY, value.data(),
                            value.size(), key.data(), key.size(), c.created_at / 1000, tag);
      if (err != RdKafka::ERR_NO_ERROR) {
        // Queue full or similar: take the record back and try again later.
        delete tag;
        std::lock_guard<std::mutex> lock(s.mu);
        if (!s.inflight.empty() && s.inflight.back().added_id == c.added_id) s.inflight.pop_back();
        break;
      }
      {
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.generation == gen) s.read_pos = c.added_id;
      }
      ++produced;
    }
    published += produced;
    return produced;
  }

  int TargetShare() {
    int members = membership->Refresh();
    return static_cast<int>((config.shards + members - 1) / members);
  }

  void HostLoop(size_t host_index);
};

void Relay::Impl::HostLoop(size_t host_index) {
  const MysqlHostConfig& host = config.mysql.hosts[host_index];
  NamedLocks locks(EndpointFor(config, host));
  std::vector<uint32_t> mine;  // shards of this host this relay owns
  auto next_ownership = std::chrono::steady_clock::now();
  int idle_ms = config.relay.poll_min_ms;
  const uint32_t host_shards = host.last_shard - host.first_shard + 1;
  uint32_t rotate = static_cast<uint32_t>(std::hash<std::string>{}(relay_id) % host_shards);

  auto lose_all = [&](const std::string& why) {
    if (!mine.empty())
      LogWarn("relay", "lost shard locks",
              {{"host", host.name}, {"reason", why}, {"shards", std::to_string(mine.size())}});
    for (uint32_t s : mine) DropShard(s, /*flush=*/false);
    owned_total -= static_cast<int>(mine.size());
    mine.clear();
    locks.Disconnect();
  };

  while (!stopping) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_ownership) {
      next_ownership = now + std::chrono::milliseconds(config.relay.lock_retry_ms);
      if (!mine.empty() && !locks.Ping().ok()) lose_all("lock connection broke");
      const int target = TargetShare();
      while (owned_total > target && !mine.empty()) {
        uint32_t s = mine.back();
        mine.pop_back();
        owned_total--;
        DropShard(s, /*flush=*/true);
        locks.Release(RelayLockName(config.ShardDatabase(s))).IgnoreError();
        LogInfo("relay", "released shard to rebalance", {{"shard", std::to_string(s)}});
      }
      for (uint32_t i = 0; i < host_shards && owned_total < target && !stopping; ++i) {
        uint32_t s = host.first_shard + (i + rotate) % host_shards;
        if (std::find(mine.begin(), mine.end(), s) != mine.end()) continue;
        auto got = locks.TryAcquire(RelayLockName(config.ShardDatabase(s)));
        if (!got.ok()) {
          lose_all(got.status().message());
          break;
        }
        if (!*got) continue;
        if (Status st = AdoptShard(s); !st.ok()) {
          locks.Release(RelayLockName(config.ShardDatabase(s))).IgnoreError();
          LogWarn("relay", "cannot adopt shard",
                  {{"shard", std::to_string(s)}, {"error", st.ToString()}});
          break;
        }
        mine.push_back(s);
        owned_total++;
        LogInfo("relay", "owns shard", {{"shard", std::to_string(s)}, {"relay", relay_id}});
      }
    }
    if (mine.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // nothing owned: wait a round
      continue;
    }

    // One query for the heads of every owned (shard, datastore) of this host.
    std::vector<std::shared_ptr<ShardStream>> streams;
    for (uint32_t s : mine)
      for (auto& st : Streams(s)) streams.push_back(st);
    std::string sql;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (i) sql += " UNION ALL ";
      sql += "SELECT " + std::to_string(i) + ", IFNULL(MAX(added_id), 0) FROM " +
             QualifiedTable(streams[i]->database, "cells_" + streams[i]->datastore);
    }
    size_t produced = 0;
    auto lease = store->PoolForShard(mine.front()).Acquire();
    if (lease.ok()) {
      auto heads = (*lease)->Query(sql);
      if (heads.ok()) {
        for (const auto& row : *heads) produced += Pump(streams[row.Uint(0)], row.Uint(1));
      }
    }
    if (produced == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));  // adaptive idle poll
      idle_ms = std::min(idle_ms * 2, config.relay.poll_max_ms);
    } else {
      idle_ms = config.relay.poll_min_ms;
    }
  }
  // Shutdown: flush and save what this thread owns, then let the locks go.
  for (uint32_t s : mine) {
    DropShard(s, /*flush=*/true);
    locks.Release(RelayLockName(config.ShardDatabase(s))).IgnoreError();
  }
  owned_total -= static_cast<int>(mine.size());
}

Relay::Relay(CellStore* store, std::string relay_id)
    : impl_(std::make_unique<Impl>(store, std::move(relay_id))) {}

Relay::~Relay() { Stop(); }

Status Relay::Start() {
  Impl& m = *impl_;
  CELLAR_ASSIGN_OR_RETURN(m.producer, m.MakeProducer());
  for (const auto& ds : m.config.datastores)
    CELLAR_RETURN_IF_ERROR(EnsureTopic(m.producer.get(), ChangeLogTopic(m.config.kafka, ds.name),
                                       m.config.kafka.partitions, kKafkaTimeoutMs));
  m.CheckAllCheckpoints();
  m.membership = std::make_unique<RelayMembership>(
      EndpointFor(m.config, m.config.mysql.hosts.front()), m.config.mysql.database_prefix);
  m.poll_thread = std::thread([&m] { m.PollLoop(); });
  m.checkpoint_thread = std::thread([&m] { m.CheckpointLoop(); });
  for (size_t h = 0; h < m.config.mysql.hosts.size(); ++h)
    m.host_threads.emplace_back([&m, h] { m.HostLoop(h); });
  LogInfo("relay", "started", {{"relay", m.relay_id}, {"brokers", m.config.kafka.brokers}});
  return Status::Ok();
}

void Relay::Stop() {
  Impl& m = *impl_;
  if (!m.producer || m.stopping.exchange(true)) return;
  // Host threads flush through the poll thread's delivery reports, so stop them first.
  for (auto& t : m.host_threads) t.join();
  m.host_threads.clear();
  {
    std::lock_guard<std::mutex> lock(m.checkpoint_mu);
    m.stop_checkpoints = true;
  }
  m.checkpoint_cv.notify_all();
  if (m.checkpoint_thread.joinable()) m.checkpoint_thread.join();
  m.stop_polling = true;
  if (m.poll_thread.joinable()) m.poll_thread.join();
  m.producer->flush(kFlushOnReleaseMs);
  m.producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
  m.producer->poll(0);
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
  std::lock_guard<std::mutex> g(impl_->streams_mu);
  for (const auto& [shard, streams] : impl_->owned) s.owned_shards.push_back(shard);
  return s;
}

}  // namespace cellar
