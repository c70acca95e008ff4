// Relay::Impl, shared by the relay's files: relay.cc (ownership rounds, the
// at-least-once pump, start/stop) and relay_exactly_once.cc (the fenced
// batches of relay.exactly_once). Private to the changelog module.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/mutex.h"
#include "base/shared_mutex.h"
#include "base/thread_annotations.h"
#include "changelog/cell_event.h"
#include "changelog/internal/host_stream.h"
#include "changelog/internal/relay_ownership.h"
#include "changelog/internal/stream_claim.h"
#include "changelog/kafka/internal/published_tail.h"
#include "changelog/kafka/kafka_producer.h"
#include "changelog/relay.h"
#include "changelog/relay_checkpoint.h"
#include "changelog/relay_probe.h"

namespace cellar {
namespace relay_internal {

using internal::DeliveryTag;
using internal::HostStream;
using internal::NamedLocks;
using internal::RelayMembership;

inline constexpr int kKafkaTimeoutMs = 5000;
inline constexpr size_t kMaxInFlightPerStream = 20000;
inline constexpr int kSaveIntervalMs = 100;
inline constexpr int kFlushOnReleaseMs = 5000;
// Exactly-once mode: a batch stops producing this long after it began (so
// the stream's row lock, held through the batch, is short).
inline constexpr int kFencedBatchMs = 1000;
// transaction.timeout.ms of a stream's transactional producer: the broker
// aborts a transaction open longer (a relay that stopped mid-batch), which
// lets read_committed readers, and a new owner's tail read, get past it.
inline constexpr int kTransactionTimeoutMs = 10000;
// A batch's commit (flush and EndTxn) and InitTransactions wait this long.
inline constexpr int kTransactionCallMs = 5000;
// The tail read waits past other streams' open transactions in the same
// partitions (at most the transaction timeout).
inline constexpr int kTailReadTimeoutMs = kTransactionTimeoutMs + 5000;
inline constexpr int kMaxPagesPerFencedBatch = 16;  // of relay.batch_cells each

// The producer's callbacks, on the poll thread (KafkaProducer::Poll).
class RelayCallbacks {
 public:
  std::atomic<uint64_t> acknowledged{0};
  std::atomic<bool> outage{false};
  std::atomic<bool> fatal{false};
  std::string relay_id;
  RelayProbe* probe = nullptr;  // may be null

  void OnDelivery(void* opaque, const Status& status, int64_t offset) {
    auto* tag = static_cast<DeliveryTag*>(opaque);
    if (!tag) return;
    if (status.ok()) {
      tag->stream->OnDelivered(tag->generation, tag->added_id, offset);
      acknowledged.fetch_add(1, std::memory_order_relaxed);
      // Exactly-once records count when their batch commits (PumpFenced).
      if (probe && !tag->stream->exactly_once) probe->Published(tag->stream->datastore);
      if (outage.exchange(false))
        LogInfo("relay", "Kafka reachable again; catching up", {{"relay", relay_id}});
    } else {
      tag->stream->OnFailed(tag->generation);
    }
    delete tag;
  }

  void OnError(const ProducerError& e) {
    if (e.fatal) {
      fatal = true;
      LogError("relay", "Kafka producer fatal error", {{"error", e.text}, {"relay", relay_id}});
      return;
    }
    if (e.unreachable) {
      if (!outage.exchange(true))
        LogWarn("relay", "Kafka unreachable; writes continue, publishing retries",
                {{"error", e.text}, {"relay", relay_id}});
    }
  }
};

}  // namespace relay_internal

using namespace relay_internal;  // NOLINT: the relay's own private names

struct Relay::Impl {
  CellStore* store;
  std::string relay_id;
  const ClusterConfig& config;
  RelayCallbacks callbacks;
  SharedMutex producer_mu;  // exclusive only while replacing the producer
  std::unique_ptr<KafkaProducer> producer GUARDED_BY(producer_mu);
  std::unique_ptr<RelayMembership> membership;
  std::atomic<bool> stopping{false};      // host threads stop
  std::atomic<bool> stop_polling{false};  // delivery reports stop (after host threads)
  std::atomic<int> owned_total{0};
  std::atomic<uint64_t> published{0}, rewinds{0}, resets{0};
  std::atomic<uint64_t> fenced{0}, skipped_already_published{0}, fenced_batches{0};
  std::atomic<uint64_t> lost_then_reused{0};    // RelayStats::positions_reused_after_loss
  std::atomic<uint64_t> replaced_producers{0};  // exactly-once: after a rolled-back batch
  std::atomic<uint64_t> transactions{0};        // exactly-once: Kafka transactions committed
  std::thread poll_thread;
  std::thread checkpoint_thread;
  Mutex checkpoint_mu;
  CondVar checkpoint_cv;
  bool stop_checkpoints GUARDED_BY(checkpoint_mu) = false;
  std::vector<std::thread> host_threads;
  std::unique_ptr<RelayProbe> probe;  // null without a registry
  std::thread metrics_thread;         // runs MetricsLoop when probe is set

  size_t total_streams = 0;  // hosts x datastores
  Mutex streams_mu;
  // lock name -> stream
  std::map<std::string, std::shared_ptr<HostStream>> owned GUARDED_BY(streams_mu);

  Impl(CellStore* s, std::string id, MetricsRegistry* metrics)
      : store(s), relay_id(std::move(id)), config(s->config()) {
    callbacks.relay_id = relay_id;
    if (metrics) probe = std::make_unique<RelayProbe>(metrics, config);
    callbacks.probe = probe.get();
  }

  Result<std::unique_ptr<KafkaProducer>> MakeProducer() {
    ProducerOptions options;
    options.settings = {{"enable.idempotence", "true"},
                        {"acks", "all"},
                        // An exactly-once batch waits for its acknowledgements, so
                        // lingering only adds latency (cellar-bench relay, commit-ack to
                        // consume p99: 15 ms with 0, 30 ms with 1).
                        {"linger.ms", config.relay.exactly_once ? "0" : "1"},
                        // Small produce requests go out at once (the broker side of the
                        // same ~40 ms Nagle delay: base/listening_sockets.h).
                        {"socket.nagle.disable", "true"},
                        {"message.timeout.ms", "30000"},
                        {"queue.buffering.max.messages", "1000000"},
                        {"allow.auto.create.topics", "false"},
                        {"client.id", "cellar-relay-" + relay_id}};
    options.on_delivery = [this](void* opaque, const Status& status, int64_t offset) {
      callbacks.OnDelivery(opaque, status, offset);
    };
    options.on_error = [this](const ProducerError& e) { callbacks.OnError(e); };
    return KafkaProducer::Create(config.kafka, std::move(options));
  }

  void PollLoop() {
    while (!stop_polling) {
      {
        ReaderMutexLock lock(&producer_mu);
        producer->Poll(50);
      }
      if (callbacks.fatal.exchange(false)) ReplaceProducer();
    }
  }

  // After a fatal producer error: every stream rewinds to what Kafka
  // acknowledged and a new producer republishes from there.
  void ReplaceProducer() {
    WriterMutexLock lock(&producer_mu);
    {
      MutexLock g(&streams_mu);
      for (auto& [name, s] : owned) s->Rewind();
    }
    producer->PurgeAll();  // frees the purged records' tags (stale generation: ignored)
    auto p = MakeProducer();
    if (p.ok()) producer = std::move(p).value();
    rewinds++;
    if (probe) probe->Rewinds().Increment();
  }

  std::shared_ptr<HostStream> Stream(const std::string& lock_name) {
    MutexLock g(&streams_mu);
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
      ReaderMutexLock lock(&producer_mu);
      CELLAR_ASSIGN_OR_RETURN(
          high, producer->PartitionHighWatermark(topic, cp->kafka_partition, kKafkaTimeoutMs));
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
    if (probe) probe->BrokerLossResets().Increment();
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
    {
      MutexLock lock(&s->mu);  // not shared yet; taken for the analysis
      s->read_pos = s->acked = s->saved = cp.after_added_id;
      s->acked_offset = cp.kafka_offset;
      s->acked_partition = cp.kafka_partition;
    }
    MutexLock g(&streams_mu);
    owned[s->lock_name] = std::move(s);
    return Status::Ok();
  }

  // Exactly-once adoption: bumps the stream's owner epoch (fencing the
  // previous owner), resets a checkpoint the broker lost, and records where
  // the stream's records may start in each partition before anything is
  // produced. The first batch reads the stream's tail (needs_reconcile).
  Status ClaimFenced(MysqlConnection& conn, HostStream& s, RelayCheckpoint* cp);

  // The checkpoint `s` should have, if it is ahead of what is saved.
  static std::optional<RelayCheckpoint> Unsaved(HostStream& s) {
    MutexLock lock(&s.mu);
    if (s.acked <= s.saved) return std::nullopt;
    RelayCheckpoint cp;
    cp.after_added_id = s.acked;
    cp.kafka_offset = s.acked_offset;
    cp.kafka_partition = s.acked_partition;
    cp.updated_at = NowMicros();
    return cp;
  }
  static void MarkSaved(HostStream& s, uint64_t acked) {
    MutexLock lock(&s.mu);
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
    MutexLock lock(&checkpoint_mu);
    while (!stop_checkpoints) {
      checkpoint_cv.WaitFor(&checkpoint_mu, std::chrono::milliseconds(kSaveIntervalMs));
      lock.Unlock();
      std::vector<std::shared_ptr<HostStream>> streams;
      {
        MutexLock g(&streams_mu);
        for (auto& [name, s] : owned) streams.push_back(s);
      }
      for (auto& s : streams) SaveStream(*s);
      lock.Lock();
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
          MutexLock lock(&s->mu);
          if (s->inflight.empty()) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // waiting on delivery reports
      }
      SaveStream(*s);
      if (s->exactly_once && !s->fenced) ReleaseFenced(*s);
    }
    if (s) CloseStreamProducers(*s);
    MutexLock g(&streams_mu);
    owned.erase(lock_name);
  }

  // Hands one cell to the producer with the stream headers
  // (kafka/internal/published_tail.h) and the CloudEvents headers
  // (cell_event.h), in both relay modes. ResourceExhausted when its queue is full.
  // `body` is the cell's body as JSON text (HostLogPage::body_texts).
  // Produces cell `c` of stream `s` with `to`: the shared producer (under
  // producer_mu) or, in exactly-once mode, the stream's own.
  Status Produce(KafkaProducer& to, HostStream& s, const Cell& c, std::string_view body,
                 DeliveryTag* tag) {
    const std::string value =
        EncodeCellEvent(s.datastore, c, body, config.kafka.max_event_body_bytes);
    const std::string key = c.row_key.ToString();
    const std::string added_id = std::to_string(c.added_id);
    const std::vector<EventHeader> ce =
        CloudEventHeaders(CloudEventBinding::kKafka, config.kafka, s.datastore, c);
    RecordHeader headers[9] = {{internal::kStreamHeader, s.database},
                               {internal::kAddedIdHeader, added_id}};
    size_t n = 2;
    for (const EventHeader& h : ce) headers[n++] = {h.name, h.value};
    return to.Produce(s.topic, ChangeLogPartition(config.kafka, c.shard), key, value,
                      c.created_at / 1000, std::span<const RecordHeader>(headers, n), tag);
  }

  // Exactly-once: the stream's transactional producers (RelayTransactionalIds;
  // the same for every relay, so the broker fences a previous owner), all
  // initialised: OK means no record of an earlier owner can still become
  // visible. On an error none is kept.
  Status OpenStreamProducers(HostStream& s);
  // Drops the stream's producers, first purging (and reporting) their records.
  static void CloseStreamProducers(HostStream& s);

  size_t PumpFenced(const std::shared_ptr<HostStream>& sp);
  // Ends a failed exactly-once batch: drops the stream's producers (the next
  // batch's new ones abort its transaction with a bumped epoch), rewinds,
  // reconciles next time.
  void FailFencedBatch(HostStream& s, const Status& why, const char* reason);
  // When `s` is read next, after a read at `round` that handed `produced`
  // cells on (host thread).
  void ScheduleNextRead(HostStream& s, size_t produced,
                        std::chrono::steady_clock::time_point round);
  bool Reconcile(HostStream& s);
  void ReleaseFenced(HostStream& s);

  // One page of the stream's host log after `after` (counted in
  // cellar_relay_log_reads_total), bodies as JSON text: an event carries its
  // body as text, so no document is built per cell.
  Result<HostLogPage> ReadLog(const HostStream& s, uint64_t after) {
    if (probe) probe->LogRead(s.host_name, s.datastore);
    return store->HostLog(s.datastore, s.host, after, config.relay.batch_cells,
                          LogBodies::kJsonText);
  }

  // Reads the next final cells of the stream's host log and hands them to
  // the producer. Returns the count.
  size_t Pump(const std::shared_ptr<HostStream>& sp) {
    HostStream& s = *sp;
    if (s.exactly_once) return PumpFenced(sp);
    bool failed;
    {
      MutexLock lock(&s.mu);
      failed = s.failed;
    }
    if (failed) {
      s.Rewind();
      rewinds++;
      if (probe) probe->Rewinds().Increment();
      LogWarn("relay", "delivery failed; rewinding stream to its acknowledged position",
              {{"host", s.host_name}, {"datastore", s.datastore}});
    }
    uint64_t after, gen;
    {
      MutexLock lock(&s.mu);
      if (s.inflight.size() >= kMaxInFlightPerStream) return 0;
      after = s.read_pos;
      gen = s.generation;
    }
    auto page = ReadLog(s, after);
    if (!page.ok()) return 0;
    size_t produced = 0;
    ReaderMutexLock plock(&producer_mu);
    for (size_t i = 0; i < page->cells.size(); ++i) {
      const Cell& c = page->cells[i];
      const int32_t partition = ChangeLogPartition(config.kafka, c.shard);
      {
        MutexLock lock(&s.mu);
        if (s.generation != gen) return produced;  // rewound meanwhile
        s.inflight.push_back({c.added_id, false, -1, partition});
      }
      auto* tag = new DeliveryTag{sp, gen, c.added_id};
      if (!Produce(*producer, s, c, page->body_texts[i], tag).ok()) {
        // Queue full or similar: take the record back and try again later.
        delete tag;
        MutexLock lock(&s.mu);
        if (!s.inflight.empty() && s.inflight.back().added_id == c.added_id) s.inflight.pop_back();
        published += produced;
        return produced;
      }
      {
        MutexLock lock(&s.mu);
        if (s.generation == gen) s.read_pos = c.added_id;
      }
      ++produced;
    }
    // Past the last cell: positions up to next_after are final and hold no
    // cell (rolled-back or failed inserts), so the read may skip them.
    {
      MutexLock lock(&s.mu);
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

  // Every kRelayMetricsIntervalMs until the checkpoint thread stops: the owned
  // stream count and every stream's lag and checkpoint age (ReadRelayStatus).
  void MetricsLoop() {
    MutexLock lock(&checkpoint_mu);
    while (!stop_checkpoints) {
      lock.Unlock();
      {
        MutexLock g(&streams_mu);
        probe->OwnedStreams().Set(static_cast<double>(owned.size()));
      }
      probe->UpdateStreams(ReadRelayStatus(*store), NowMicros());
      lock.Lock();
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(kRelayMetricsIntervalMs);
      // Woken early only by a stop (or spuriously): then wait out the interval.
      while (!stop_checkpoints && checkpoint_cv.WaitUntil(&checkpoint_mu, deadline)) {
      }
    }
  }
};

}  // namespace cellar
