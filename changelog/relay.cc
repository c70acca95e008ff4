#include "changelog/relay.h"

#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "base/log.h"
#include "changelog/cell_event.h"
#include "changelog/internal/host_stream.h"
#include "changelog/internal/published_tail.h"
#include "changelog/internal/relay_ownership.h"
#include "changelog/internal/stream_claim.h"
#include "changelog/kafka_conf.h"
#include "changelog/relay_checkpoint.h"

namespace cellar {

using internal::DeliveryTag;
using internal::HostStream;
using internal::NamedLocks;
using internal::RelayMembership;

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

namespace {

constexpr int kKafkaTimeoutMs = 5000;
constexpr size_t kMaxInFlightPerStream = 20000;
constexpr int kSaveIntervalMs = 100;
constexpr int kFlushOnReleaseMs = 5000;
// Exactly-once mode: a batch stops producing this long after it began, and
// the producer gives a record up after kFencedMessageTimeoutMs, so an owner
// that lost its claim mid-batch has nothing in flight after the sum (plus a
// margin): what a new owner waits before reading the stream's tail when the
// previous owner did not hand over cleanly (internal/stream_claim.h).
constexpr int kFencedBatchMs = 1000;
constexpr int kFencedMessageTimeoutMs = 3000;
constexpr int kTakeoverGraceMs = kFencedBatchMs + kFencedMessageTimeoutMs + 500;
constexpr int kTailReadTimeoutMs = 10000;
constexpr int kMaxPagesPerFencedBatch = 16;  // of relay.batch_cells each

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
  std::atomic<uint64_t> fenced{0}, skipped_already_published{0}, fenced_batches{0};
  std::thread poll_thread;
  std::thread checkpoint_thread;
  std::mutex checkpoint_mu;
  std::condition_variable checkpoint_cv;
  bool stop_checkpoints = false;  // guarded by checkpoint_mu
  std::vector<std::thread> host_threads;

  size_t total_streams = 0;  // hosts x datastores
  std::mutex streams_mu;
  std::map<std::string, std::shared_ptr<HostStream>> owned;  // lock name -> stream

  Impl(CellStore* s, std::string id) : store(s), relay_id(std::move(id)), config(s->config()) {
    callbacks.relay_id = relay_id;
  }

  Result<std::unique_ptr<RdKafka::Producer>> MakeProducer() {
    CELLAR_ASSIGN_OR_RETURN(
        auto conf,
        MakeKafkaConf(
            config.kafka,
            {{"enable.idempotence", "true"},
             {"acks", "all"},
             // An exactly-once batch waits for its acknowledgements: on the
             // local broker they took ~43 ms with linger.ms=1, ~1 ms with 0
             // (5: slower still in cellar-bench relay).
             {"linger.ms", config.relay.exactly_once ? "0" : "1"},
             {"message.timeout.ms",
              config.relay.exactly_once ? std::to_string(kFencedMessageTimeoutMs) : "30000"},
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
      for (auto& [name, s] : owned) s->Rewind();
    }
    producer->purge(RdKafka::Producer::PURGE_QUEUE | RdKafka::Producer::PURGE_INFLIGHT);
    producer->poll(0);  // frees the purged records' tags (stale generation: ignored)
    auto p = MakeProducer();
    if (p.ok()) producer = std::move(p).value();
    rewinds++;
  }

  std::shared_ptr<HostStream> Stream(const std::string& lock_name) {
    std::lock_guard<std::mutex> g(streams_mu);
    auto it = owned.find(lock_name);
    return it == owned.end() ? nullptr : it->second;
  }

  // True when the broker no longer has the record the checkpoint says was
  // acknowledged (its partition ends at or before that offset): the broker
  // lost events, e.g. the local in-memory broker restarted. Resets the checkpoint.
  Result<bool> ResetIfBrokerLost(MysqlConnection& conn, const std::string& database,
                                 const std::string& host_name, const std::string& datastore,
                                 RelayCheckpoint* cp) {
    if (cp->after_added_id == 0 || cp->kafka_offset < 0 || cp->kafka_partition < 0) return false;
    const std::string topic = ChangeLogTopic(config.kafka, datastore);
    int64_t high;
    {
      std::shared_lock<std::shared_mutex> lock(producer_mu);
      CELLAR_ASSIGN_OR_RETURN(high, PartitionHighWatermark(producer.get(), topic,
                                                           cp->kafka_partition, kKafkaTimeoutMs));
    }
    if (high > cp->kafka_offset) return false;
    LogWarn("relay",
            "broker has fewer records than the checkpoint says were published; "
            "republishing the host log from the beginning",
            {{"host", host_name},
             {"datastore", datastore},
             {"checkpoint", std::to_string(cp->after_added_id)},
             {"checkpoint_partition", std::to_string(cp->kafka_partition)},
             {"checkpoint_offset", std::to_string(cp->kafka_offset)},
             {"partition_end", std::to_string(high)}});
    CELLAR_RETURN_IF_ERROR(ResetCheckpoint(conn, database, datastore));
    *cp = RelayCheckpoint{};
    resets++;
    return true;
  }

  // Before publishing anything: find every stream whose checkpoint the broker
  // cannot back, so that no relay's first records hide an older loss behind a
  // grown partition end. Unreachable hosts are checked again on adoption.
  void CheckAllCheckpoints() {
    for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
      const MysqlHostConfig& host = config.mysql.hosts[h];
      const std::string db = config.HostDatabase(host);
      auto lease = store->PoolForHost(h).Acquire();
      if (!lease.ok()) continue;
      if (!EnsureCheckpointTable(**lease, db).ok()) continue;
      for (const auto& ds : config.datastores) {
        auto cp = LoadCheckpoint(**lease, db, ds.name);
        if (cp.ok())
          ResetIfBrokerLost(**lease, db, host.name, ds.name, &*cp).status().IgnoreError();
      }
    }
  }

  // Loads the checkpoint of a newly locked stream and checks that the broker
  // still has what the checkpoint claims was published.
  Status AdoptStream(size_t host, const std::string& datastore) {
    const MysqlHostConfig& hc = config.mysql.hosts[host];
    auto s = std::make_shared<HostStream>();
    s->host = host;
    s->host_name = hc.name;
    s->datastore = datastore;
    s->database = config.HostDatabase(hc);
    s->topic = ChangeLogTopic(config.kafka, datastore);
    s->lock_name = RelayLockName(s->database, datastore);
    auto lease = store->PoolForHost(host).Acquire();
    if (!lease.ok()) return lease.status();
    CELLAR_RETURN_IF_ERROR(EnsureCheckpointTable(**lease, s->database));
    RelayCheckpoint cp;
    if (config.relay.exactly_once) {
      CELLAR_RETURN_IF_ERROR(ClaimFenced(**lease, *s, &cp));
    } else {
      CELLAR_ASSIGN_OR_RETURN(cp, LoadCheckpoint(**lease, s->database, datastore));
      CELLAR_RETURN_IF_ERROR(
          ResetIfBrokerLost(**lease, s->database, hc.name, datastore, &cp).status());
    }
    s->read_pos = s->acked = s->saved = cp.after_added_id;
    s->acked_offset = cp.kafka_offset;
    s->acked_partition = cp.kafka_partition;
    std::lock_guard<std::mutex> g(streams_mu);
    owned[s->lock_name] = std::move(s);
    return Status::Ok();
  }

  // Exactly-once adoption: bumps the stream's owner epoch (fencing the
  // previous owner), resets a checkpoint the broker lost, and records where
  // the stream's records may start in each partition before anything is
  // produced. The first batch reads the stream's tail (needs_reconcile).
  Status ClaimFenced(MysqlConnection& conn, HostStream& s, RelayCheckpoint* cp) {
    CELLAR_ASSIGN_OR_RETURN(internal::StreamClaim claim,
                            internal::ClaimStream(conn, s.database, s.datastore));
    *cp = claim.checkpoint;
    CELLAR_ASSIGN_OR_RETURN(bool reset,
                            ResetIfBrokerLost(conn, s.database, s.host_name, s.datastore, cp));
    if (reset) claim.scan_offsets.clear();
    if (claim.scan_offsets.empty()) {
      {
        std::shared_lock<std::shared_mutex> lock(producer_mu);
        CELLAR_ASSIGN_OR_RETURN(claim.scan_offsets,
                                internal::PartitionEnds(producer.get(), s.topic,
                                                        config.kafka.partitions, kKafkaTimeoutMs));
      }
      CELLAR_RETURN_IF_ERROR(
          internal::BeginFencedBatch(conn, s.database, s.datastore, claim.epoch));
      CELLAR_RETURN_IF_ERROR(
          internal::CommitFencedBatch(conn, s.database, s.datastore, *cp, claim.scan_offsets));
    }
    s.exactly_once = true;
    s.epoch = claim.epoch;
    s.scan_offsets = std::move(claim.scan_offsets);
    s.needs_reconcile = true;
    if (!claim.previous_owner_released) {
      s.not_before = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTakeoverGraceMs);
      LogInfo("relay",
              "previous owner did not hand the stream over cleanly; waiting for its records "
              "to settle",
              {{"host", s.host_name},
               {"datastore", s.datastore},
               {"wait_ms", std::to_string(kTakeoverGraceMs)}});
    }
    return Status::Ok();
  }

  // The checkpoint `s` should have, if it is ahead of what is saved.
  static std::optional<RelayCheckpoint> Unsaved(HostStream& s) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.acked <= s.saved) return std::nullopt;
    RelayCheckpoint cp;
    cp.after_added_id = s.acked;
    cp.kafka_offset = s.acked_offset;
    cp.kafka_partition = s.acked_partition;
    cp.updated_at = NowMicros();
    return cp;
  }
  static void MarkSaved(HostStream& s, uint64_t acked) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.saved = std::max(s.saved, acked);
  }

  // Saves one stream's checkpoint if it moved. Checkpoints are monotonic
  // (SaveCheckpoint never moves one back), so racing with a DropStream save
  // of the same stream is harmless.
  void SaveStream(HostStream& s) {
    if (s.exactly_once) return;  // saved with each fenced batch
    std::optional<RelayCheckpoint> cp = Unsaved(s);
    if (!cp) return;
    auto lease = store->PoolForHost(s.host).Acquire();
    if (!lease.ok()) return;
    if (SaveCheckpoint(**lease, s.database, s.datastore, *cp).ok())
      MarkSaved(s, cp->after_added_id);
  }

  // Saves checkpoints every kSaveIntervalMs on its own thread, so that log
  // flushes never delay publishing.
  void CheckpointLoop() {
    std::unique_lock<std::mutex> lock(checkpoint_mu);
    while (!stop_checkpoints) {
      checkpoint_cv.wait_for(lock, std::chrono::milliseconds(kSaveIntervalMs));
      lock.unlock();
      std::vector<std::shared_ptr<HostStream>> streams;
      {
        std::lock_guard<std::mutex> g(streams_mu);
        for (auto& [name, s] : owned) streams.push_back(s);
      }
      for (auto& s : streams) SaveStream(*s);
      lock.lock();
    }
  }

  // Flushes, saves and forgets a stream (its lock is released by the caller).
  void DropStream(const std::string& lock_name, bool flush) {
    auto s = Stream(lock_name);
    if (s && flush) {
      auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(kFlushOnReleaseMs);
      while (std::chrono::steady_clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(s->mu);
          if (s->inflight.empty()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waiting on delivery reports
      }
      SaveStream(*s);
      if (s->exactly_once && !s->fenced) ReleaseFenced(*s);
    }
    std::lock_guard<std::mutex> g(streams_mu);
    owned.erase(lock_name);
  }

  // Hands one cell to the producer with the stream headers
  // (internal/published_tail.h). REQUIRES: producer_mu held shared.
  RdKafka::ErrorCode Produce(HostStream& s, const Cell& c, DeliveryTag* tag) {
    const std::string value = EncodeCellEvent(s.datastore, c, config.kafka.max_event_body_bytes);
    const std::string key = c.row_key.ToString();
    RdKafka::Headers* headers = RdKafka::Headers::create();
    headers->add(internal::kStreamHeader, s.database);
    headers->add(internal::kAddedIdHeader, std::to_string(c.added_id));
    RdKafka::ErrorCode err =
        producer->produce(s.topic, ChangeLogPartition(config.kafka, c.shard),
                          RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
                          value.size(), key.data(), key.size(), c.created_at / 1000, headers, tag);
    if (err != RdKafka::ERR_NO_ERROR) delete headers;  // not taken over by librdkafka
    return err;
  }

  size_t PumpFenced(const std::shared_ptr<HostStream>& sp);
  bool Reconcile(HostStream& s);
  void ReleaseFenced(HostStream& s);

  // Reads the next final cells of the stream's host log and hands them to
  // the producer. Returns the count.
  size_t Pump(const std::shared_ptr<HostStream>& sp) {
    HostStream& s = *sp;
    if (s.exactly_once) return PumpFenced(sp);
    bool failed;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      failed = s.failed;
    }
    if (failed) {
      s.Rewind();
      rewinds++;
      LogWarn("relay", "delivery failed; rewinding stream to its acknowledged position",
              {{"host", s.host_name}, {"datastore", s.datastore}});
    }
    uint64_t after, gen;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.inflight.size() >= kMaxInFlightPerStream) return 0;
      after = s.read_pos;
      gen = s.generation;
    }
    auto page = store->HostLog(s.datastore, s.host, after, config.relay.batch_cells);
    if (!page.ok()) return 0;
    size_t produced = 0;
    std::shared_lock<std::shared_mutex> plock(producer_mu);
    for (const Cell& c : page->cells) {
      const int32_t partition = ChangeLogPartition(config.kafka, c.shard);
      {
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.generation != gen) return produced;  // rewound meanwhile
        s.inflight.push_back({c.added_id, false, -1, partition});
      }
      auto* tag = new DeliveryTag{sp, gen, c.added_id};
      RdKafka::ErrorCode err = Produce(s, c, tag);
      if (err != RdKafka::ERR_NO_ERROR) {
        // Queue full or similar: take the record back and try again later.
        delete tag;
        std::lock_guard<std::mutex> lock(s.mu);
        if (!s.inflight.empty() && s.inflight.back().added_id == c.added_id) s.inflight.pop_back();
        published += produced;
        return produced;
      }
      {
        std::lock_guard<std::mutex> lock(s.mu);
        if (s.generation == gen) s.read_pos = c.added_id;
      }
      ++produced;
    }
    // Past the last cell: positions up to next_after are final and hold no
    // cell (rolled-back or failed inserts), so the read may skip them.
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.generation == gen && s.read_pos < page->next_after) {
        s.read_pos = page->next_after;
        if (s.inflight.empty() && s.acked < s.read_pos) s.acked = s.read_pos;
      }
    }
    published += produced;
    return produced;
  }

  int TargetShare() {
    int members = membership->Refresh();
    return static_cast<int>((total_streams + members - 1) / members);
  }

  void HostLoop(size_t host_index);
};

void Relay::Impl::HostLoop(size_t host_index) {
  const MysqlHostConfig& host = config.mysql.hosts[host_index];
  const std::string db = config.HostDatabase(host);
  NamedLocks locks(EndpointFor(config, host));
  std::vector<std::string> mine;  // lock names of the streams of this host this relay owns
  auto next_ownership = std::chrono::steady_clock::now();
  int idle_ms = config.relay.poll_min_ms;
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
    size_t produced = 0;
    for (const auto& name : mine)
      if (auto s = Stream(name)) produced += Pump(s);
    for (size_t i = 0; i < mine.size();) {
      auto s = Stream(mine[i]);
      if (!s || !s->fenced) {
        ++i;
        continue;
      }
      // Another relay claimed the stream: this one publishes nothing more of it.
      LogWarn("relay", "fenced: another relay claimed the stream; dropping it",
              {{"host", host.name}, {"datastore", s->datastore}, {"relay", relay_id}});
      fenced++;
      DropStream(mine[i], /*flush=*/false);
      locks.Release(mine[i]).IgnoreError();
      owned_total--;
      mine.erase(mine.begin() + static_cast<long>(i));
    }
    if (produced == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));  // adaptive idle poll
      idle_ms = std::min(idle_ms * 2, config.relay.poll_max_ms);
    } else {
      idle_ms = config.relay.poll_min_ms;
    }
  }
  // Shutdown: flush and save what this thread owns, then let the locks go.
  for (const auto& name : mine) {
    DropStream(name, /*flush=*/true);
    locks.Release(name).IgnoreError();
  }
  owned_total -= static_cast<int>(mine.size());
}

// Reads what the stream already has in Kafka beyond its committed position,
// so the next batches skip it. False (retry later) when Kafka does not answer.
bool Relay::Impl::Reconcile(HostStream& s) {
  auto tail = internal::ReadPublishedTail(config.kafka, s.topic, config.kafka.partitions,
                                          s.database, s.scan_offsets, kTailReadTimeoutMs);
  if (!tail.ok()) {
    LogWarn(
        "relay", "cannot read what the stream already published; retrying",
        {{"host", s.host_name}, {"datastore", s.datastore}, {"error", tail.status().ToString()}});
    return false;
  }
  s.published_tail = std::move(tail).value();
  s.needs_reconcile = false;
  return true;
}

void Relay::Impl::ReleaseFenced(HostStream& s) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.inflight.empty() || s.failed) return;  // records may still land: not clean
  }
  if (s.needs_reconcile) return;
  auto lease = store->PoolForHost(s.host).Acquire();
  if (lease.ok())
    internal::ReleaseStreamClaim(**lease, s.database, s.datastore, s.epoch).IgnoreError();
}

// One exactly-once batch: reads final cells, checks the claim under the
// stream's row lock, produces the cells Kafka does not hold yet, waits for
// every acknowledgement and commits the new position in the same MySQL
// transaction (internal/stream_claim.h). Any failure rolls the batch back; the
// next batch first reads what reached Kafka anyway. Returns the cells produced.
size_t Relay::Impl::PumpFenced(const std::shared_ptr<HostStream>& sp) {
  HostStream& s = *sp;
  if (s.fenced || std::chrono::steady_clock::now() < s.not_before) return 0;
  if (s.needs_reconcile && !Reconcile(s)) return 0;
  uint64_t after;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    after = s.read_pos;
  }
  auto page = store->HostLog(s.datastore, s.host, after, config.relay.batch_cells);
  if (!page.ok()) return 0;
  if (page->cells.empty()) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.read_pos = std::max(s.read_pos, page->next_after);  // ids that will never hold a cell
    return 0;
  }
  auto lease = store->PoolForHost(s.host).Acquire();
  if (!lease.ok()) return 0;
  MysqlConnection& conn = **lease;
  const auto started = std::chrono::steady_clock::now();
  if (Status st = internal::BeginFencedBatch(conn, s.database, s.datastore, s.epoch); !st.ok()) {
    if (st.code() == StatusCode::kAborted) s.fenced = true;
    return 0;
  }
  uint64_t gen, last = after;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    gen = s.generation;
    s.batch_offsets.clear();
  }
  // Pages keep coming into the same batch while the log has more (a backlog):
  // one acknowledgement wait and one commit per kMaxPagesPerFencedBatch pages.
  const auto stop_producing = started + std::chrono::milliseconds(kFencedBatchMs);
  const auto stop_reading = started + std::chrono::milliseconds(kFencedBatchMs / 2);
  size_t produced = 0, skipped = 0;
  for (int pages = 0;; ++pages) {
    bool whole_page = true;
    {
      std::shared_lock<std::shared_mutex> plock(producer_mu);
      for (const Cell& c : page->cells) {
        const int32_t partition = ChangeLogPartition(config.kafka, c.shard);
        auto t = s.published_tail.find(partition);
        if (t != s.published_tail.end() && c.added_id <= t->second) {
          last = c.added_id;  // already in Kafka (an earlier owner or a rolled-back batch)
          ++skipped;
          continue;
        }
        if (std::chrono::steady_clock::now() >= stop_producing) {
          whole_page = false;
          break;
        }
        {
          std::lock_guard<std::mutex> lock(s.mu);
          s.inflight.push_back({c.added_id, false, -1, partition});
        }
        auto* tag = new DeliveryTag{sp, gen, c.added_id};
        if (Produce(s, c, tag) != RdKafka::ERR_NO_ERROR) {
          delete tag;
          std::lock_guard<std::mutex> lock(s.mu);
          s.inflight.pop_back();
          whole_page = false;
          break;
        }
        last = c.added_id;
        ++produced;
      }
    }
    if (!whole_page) break;
    last = std::max(last, page->next_after);
    const bool full = page->cells.size() >= static_cast<size_t>(config.relay.batch_cells);
    if (!full || pages + 1 >= kMaxPagesPerFencedBatch ||
        std::chrono::steady_clock::now() >= stop_reading)
      break;
    page = store->HostLog(s.datastore, s.host, last, config.relay.batch_cells);
    if (!page.ok() || page->cells.empty()) break;
  }
  bool delivered;
  RelayCheckpoint cp;
  internal::ScanOffsets scan = s.scan_offsets;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    delivered = s.delivered.wait_until(
        lock, started + std::chrono::milliseconds(kFencedBatchMs + kFencedMessageTimeoutMs + 500),
        [&] { return s.inflight.empty() || s.failed; });
    delivered = delivered && !s.failed;
    cp.after_added_id = last;
    cp.kafka_offset = s.acked_offset;
    cp.kafka_partition = s.acked_partition;
    for (const auto& [p, offset] : s.batch_offsets) scan[p] = std::max(scan[p], offset + 1);
  }
  published += produced;
  if (delivered) {
    if (internal::CommitFencedBatch(conn, s.database, s.datastore, cp, scan).ok()) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.read_pos = s.acked = s.saved = last;
      s.scan_offsets = std::move(scan);
      skipped_already_published += skipped;
      return produced;
    }
  } else {
    conn.Rollback();
  }
  // Rolled back: some records may be in Kafka; read the tail before the next try.
  fenced_batches++;
  s.Rewind();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.read_pos = s.acked = s.saved;
  }
  s.needs_reconcile = true;
  s.not_before = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(delivered ? 0 : kFencedMessageTimeoutMs);
  LogWarn("relay", "exactly-once batch rolled back; the next one resumes after what Kafka holds",
          {{"host", s.host_name},
           {"datastore", s.datastore},
           {"reason", delivered ? "position commit failed" : "delivery failed or timed out"}});
  return produced;
}

Relay::Relay(CellStore* store, std::string relay_id)
    : impl_(std::make_unique<Impl>(store, std::move(relay_id))) {}

Relay::~Relay() { Stop(); }

Status Relay::Start() {
  Impl& m = *impl_;
  if (Status layout = m.store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  m.total_streams = m.config.mysql.hosts.size() * m.config.datastores.size();
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
  s.fenced = impl_->fenced;
  s.skipped_already_published = impl_->skipped_already_published;
  s.failed_fenced_batches = impl_->fenced_batches;
  std::lock_guard<std::mutex> g(impl_->streams_mu);
  for (const auto& [name, stream] : impl_->owned)
    s.owned_streams.push_back(stream->host_name + "/" + stream->datastore);
  return s;
}

}  // namespace cellar
