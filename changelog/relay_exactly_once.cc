// The exactly-once relay's fenced batches (relay.exactly_once): claim,
// reconcile with what Kafka holds, publish, release. The argument is in
// internal/stream_claim.h; the delivery contract in README (The relay).
#include "changelog/internal/relay_impl.h"

namespace cellar {

// Exactly-once adoption: bumps the stream's owner epoch (fencing the
// previous owner), resets a checkpoint the broker lost, and records where
// the stream's records may start in each partition before anything is
// produced. The first batch reads the stream's tail (needs_reconcile).
Status Relay::Impl::ClaimFenced(MysqlConnection& conn, HostStream& s, RelayCheckpoint* cp) {
  CELLAR_ASSIGN_OR_RETURN(internal::StreamClaim claim,
                          internal::ClaimStream(conn, s.database, s.datastore));
  *cp = claim.checkpoint;
  CELLAR_ASSIGN_OR_RETURN(bool reset,
                          ResetIfBrokerLost(conn, s.database, s.host_name, s.datastore, cp));
  if (reset) claim.scan_offsets.clear();
  if (claim.scan_offsets.empty()) {
    {
      ReaderMutexLock lock(&producer_mu);
      CELLAR_ASSIGN_OR_RETURN(
          claim.scan_offsets,
          internal::PartitionEnds(*producer, s.topic, config.kafka.partitions, kKafkaTimeoutMs));
    }
    CELLAR_RETURN_IF_ERROR(internal::BeginFencedBatch(conn, s.database, s.datastore, claim.epoch));
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

// Reads what the stream already has in Kafka beyond its committed position,
// so the next batches skip it. False (retry later) when Kafka does not answer.
bool Relay::Impl::Reconcile(HostStream& s) {
  Result<internal::ScanOffsets> ends = Unavailable("no producer");
  {
    ReaderMutexLock lock(&producer_mu);
    ends = internal::PartitionEnds(*producer, s.topic, config.kafka.partitions, kKafkaTimeoutMs);
  }
  auto tail = ends.ok() ? internal::ReadPublishedTail(config.kafka, s.topic, *ends, s.database,
                                                      s.scan_offsets, kTailReadTimeoutMs)
                        : Result<std::map<int32_t, uint64_t>>(ends.status());
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
    MutexLock lock(&s.mu);
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
    MutexLock lock(&s.mu);
    after = s.read_pos;
  }
  auto page = ReadLog(s, after);
  if (!page.ok()) return 0;
  if (page->cells.empty()) {
    MutexLock lock(&s.mu);
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
    MutexLock lock(&s.mu);
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
      ReaderMutexLock plock(&producer_mu);
      for (size_t i = 0; i < page->cells.size(); ++i) {
        const Cell& c = page->cells[i];
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
          MutexLock lock(&s.mu);
          s.inflight.push_back({c.added_id, false, -1, partition});
        }
        auto* tag = new DeliveryTag{sp, gen, c.added_id};
        if (!Produce(s, c, page->body_texts[i], tag).ok()) {
          delete tag;
          MutexLock lock(&s.mu);
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
    page = ReadLog(s, last);
    if (!page.ok() || page->cells.empty()) break;
  }
  published += produced;  // handed to the producer (RelayStats::published)
  bool delivered;
  RelayCheckpoint cp;
  internal::ScanOffsets scan = s.scan_offsets;
  {
    MutexLock lock(&s.mu);
    const auto deadline =
        started + std::chrono::milliseconds(kFencedBatchMs + kFencedMessageTimeoutMs + 500);
    delivered = true;
    while (!(s.inflight.empty() || s.failed)) {
      if (!s.delivered.WaitUntil(&s.mu, deadline)) {
        delivered = s.inflight.empty() || s.failed;
        break;
      }
    }
    // A rewind meanwhile (a replaced producer purged the batch) also fails it.
    delivered = delivered && !s.failed && s.generation == gen;
    cp.after_added_id = last;
    cp.kafka_offset = s.acked_offset;
    cp.kafka_partition = s.acked_partition;
    for (const auto& [p, offset] : s.batch_offsets) scan[p] = std::max(scan[p], offset + 1);
  }
  if (delivered) {
    if (internal::CommitFencedBatch(conn, s.database, s.datastore, cp, scan).ok()) {
      MutexLock lock(&s.mu);
      s.read_pos = s.acked = s.saved = last;
      s.scan_offsets = std::move(scan);
      skipped_already_published += skipped;
      if (probe) {
        probe->Published(s.datastore, produced + skipped);
        probe->SkippedAlreadyPublished().Increment(skipped);
      }
      return produced;
    }
  } else {
    conn.Rollback();
  }
  // Rolled back: some records may be in Kafka; read the tail before the next try.
  fenced_batches++;
  if (probe) probe->FencedBatchesRolledBack().Increment();
  s.Rewind();
  {
    MutexLock lock(&s.mu);
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

}  // namespace cellar
