// The exactly-once relay's fenced batches (relay.exactly_once): claim,
// reconcile with what Kafka holds, publish, release. The argument is in
// internal/stream_claim.h; the delivery contract in docs/design.md (The relay).
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
  if (!claim.previous_owner_released)
    LogInfo("relay",
            "previous owner did not hand the stream over cleanly; its open transaction is "
            "fenced and aborted by the broker",
            {{"host", s.host_name}, {"datastore", s.datastore}});
  // Fences the previous owner's producers before the tail is read: after
  // this, what the stream has in Kafka only changes by this relay's batches.
  // When Kafka does not answer, PumpFenced opens them later.
  if (Status st = OpenStreamProducers(s); !st.ok())
    LogWarn("relay", "cannot open the stream's transactional producers yet; retrying",
            {{"host", s.host_name}, {"datastore", s.datastore}, {"error", st.ToString()}});
  return Status::Ok();
}

Status Relay::Impl::OpenStreamProducers(HostStream& s) {
  CloseStreamProducers(s);
  ProducerOptions options;
  options.settings = {{"transaction.timeout.ms", std::to_string(kTransactionTimeoutMs)},
                      {"enable.idempotence", "true"},
                      {"acks", "all"},
                      // A batch waits for its acknowledgements, so lingering only adds latency.
                      {"linger.ms", "0"},
                      {"socket.nagle.disable", "true"},
                      {"message.timeout.ms", std::to_string(kTransactionTimeoutMs)},
                      {"queue.buffering.max.messages", "1000000"},
                      {"allow.auto.create.topics", "false"},
                      // A broker that restarted is found again within a second, not after
                      // librdkafka's default backoff of up to 10 s.
                      {"reconnect.backoff.max.ms", "1000"},
                      // Retriable request errors are retried at once, not after 100 ms.
                      {"retry.backoff.ms", "5"}};
  options.on_delivery = [this](void* opaque, const Status& status, int64_t offset) {
    callbacks.OnDelivery(opaque, status, offset);
  };
  options.on_error = [this](const ProducerError& e) {
    // Fatal errors also fail the next transactional call, which replaces
    // the producer; only outages are worth a line of their own.
    if (!e.fatal) callbacks.OnError(e);
  };
  const std::vector<std::string> ids = RelayTransactionalIds(config, s.database, s.datastore);
  std::vector<std::unique_ptr<KafkaProducer>> producers;
  for (size_t i = 0; i < ids.size(); ++i) {
    ProducerOptions o = options;
    o.settings["transactional.id"] = ids[i];
    o.settings["client.id"] =
        "cellar-relay-" + relay_id + "-" + s.database + "-" + s.datastore + "-" + std::to_string(i);
    CELLAR_ASSIGN_OR_RETURN(auto p, KafkaProducer::Create(config.kafka, std::move(o)));
    CELLAR_RETURN_IF_ERROR(p->InitTransactions(kTransactionCallMs));
    // Learns the topic's leaders now: otherwise the producer's first batch
    // waits about a second for librdkafka's metadata refresh. Without an
    // answer, that batch waits instead.
    (void)p->TopicPartitions(s.topic, kKafkaTimeoutMs);
    producers.push_back(std::move(p));
  }
  s.txn_producers = std::move(producers);
  s.next_producer = 0;
  return Status::Ok();
}

void Relay::Impl::CloseStreamProducers(HostStream& s) {
  // Purging reports (and frees) what is left; nothing commits it.
  for (auto& p : s.txn_producers) p->PurgeAll();
  s.txn_producers.clear();
}

// Reads what the stream already has in Kafka beyond its committed position,
// so the next batches skip it. False (retry later) when Kafka does not answer.
bool Relay::Impl::Reconcile(HostStream& s) {
  Result<internal::ScanOffsets> ends = Unavailable("no producer");
  {
    ReaderMutexLock lock(&producer_mu);
    ends = internal::PartitionEnds(*producer, s.topic, config.kafka.partitions, kKafkaTimeoutMs);
  }
  uint64_t checkpoint;
  {
    MutexLock lock(&s.mu);
    checkpoint = s.read_pos;  // no batch is open: what the next one reads after
  }
  auto tail = ends.ok()
                  ? internal::ReadPublishedTail(config.kafka, s.topic, *ends, s.database,
                                                s.scan_offsets, checkpoint, kTailReadTimeoutMs)
                  : Result<std::map<int32_t, internal::PartitionTail>>(ends.status());
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
// stream's row lock, produces the cells Kafka does not hold yet in one Kafka
// transaction of the stream's producer, commits that, then commits the new
// position in the MySQL transaction holding the row lock
// (internal/stream_claim.h). Any failure rolls both back (an aborted Kafka
// transaction is never seen by read_committed readers); when only the MySQL
// commit fails, the next batch reads the tail and skips what Kafka holds.
// Returns the cells produced.
size_t Relay::Impl::PumpFenced(const std::shared_ptr<HostStream>& sp) {
  HostStream& s = *sp;
  if (s.fenced) return 0;
  if (s.txn_producers.empty() && !OpenStreamProducers(s).ok()) return 0;
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
  KafkaProducer& txn = *s.txn_producers[s.next_producer];
  if (Status st = txn.BeginTransaction(); !st.ok()) {
    conn.Rollback();
    FailFencedBatch(s, st, "begin_transaction failed");
    return 0;
  }
  uint64_t gen, last = after;
  {
    MutexLock lock(&s.mu);
    gen = s.generation;
    s.batch_offsets.clear();
  }
  // Pages keep coming into the same batch while the log has more (a backlog):
  // one transaction and one position commit per kMaxPagesPerFencedBatch pages.
  const auto stop_producing = started + std::chrono::milliseconds(kFencedBatchMs);
  const auto stop_reading = started + std::chrono::milliseconds(kFencedBatchMs / 2);
  size_t produced = 0, skipped = 0, reused = 0;
  uint64_t first_reused = 0;
  for (int pages = 0;; ++pages) {
    bool whole_page = true;
    for (size_t i = 0; i < page->cells.size(); ++i) {
      const Cell& c = page->cells[i];
      const int32_t partition = ChangeLogPartition(config.kafka, c.shard);
      if (auto t = s.published_tail.find(partition);
          t != s.published_tail.end() && c.added_id <= t->second.highest) {
        auto at = t->second.subjects.find(c.added_id);
        if (at != t->second.subjects.end() &&
            internal::SameSubject(at->second, internal::SubjectHash(CellSubject(c)))) {
          last = c.added_id;  // already in Kafka (committed by an earlier owner or batch)
          ++skipped;
          continue;
        }
        if (at != t->second.subjects.end()) {
          // Kafka holds another cell at this added_id: one the host no longer
          // has (a failover with --accept-loss), its id given to this cell.
          if (reused++ == 0) first_reused = c.added_id;
          t->second.subjects.erase(at);
        }
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
      if (!Produce(txn, s, c, page->body_texts[i], tag).ok()) {
        delete tag;
        MutexLock lock(&s.mu);
        s.inflight.pop_back();
        whole_page = false;
        break;
      }
      last = c.added_id;
      ++produced;
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
  if (reused > 0) {
    lost_then_reused += reused;
    if (probe) probe->PositionsReusedAfterLoss().Increment(reused);
    LogError("relay",
             "the change log holds cells this host no longer stores at the positions of stored "
             "ones (commits lost by a failover with --accept-loss): publishing the stored cells",
             {{"host", s.host_name},
              {"datastore", s.datastore},
              {"positions", std::to_string(reused)},
              {"first_added_id", std::to_string(first_reused)}});
  }
  // Flushes (delivery reports run on this thread) and commits: from here on
  // read_committed readers see the batch, or, on an error, never will.
  Status committed = txn.CommitTransaction(kTransactionCallMs);
  RelayCheckpoint cp;
  internal::ScanOffsets scan = s.scan_offsets;
  {
    MutexLock lock(&s.mu);
    // Every record reported delivered, none failed, no rewind meanwhile.
    if (committed.ok() && !(s.inflight.empty() && !s.failed && s.generation == gen))
      committed = Internal("transaction committed with records not acknowledged");
    cp.after_added_id = last;
    cp.kafka_offset = s.acked_offset;
    cp.kafka_partition = s.acked_partition;
    for (const auto& [p, offset] : s.batch_offsets) scan[p] = std::max(scan[p], offset + 1);
  }
  if (!committed.ok()) {
    conn.Rollback();
    FailFencedBatch(s, committed, "commit_transaction failed");
    return produced;
  }
  s.next_producer = (s.next_producer + 1) % s.txn_producers.size();
  transactions++;
  if (probe) probe->TransactionCommitted(s.host_name, s.datastore);
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
  // Kafka holds the batch but MySQL not its position: the next batch reads
  // the tail and skips what is there.
  FailFencedBatch(s, Unavailable("position commit failed"), "position commit failed");
  return produced;
}

void Relay::Impl::FailFencedBatch(HostStream& s, const Status& why, const char* reason) {
  // The batch's transaction is never committed. Rather than aborting it and
  // reusing the producers, the next batch builds new ones: their
  // InitTransactions aborts it with a bumped producer epoch, so a produce
  // request of this batch still on its way to a partition leader is refused
  // as fenced instead of opening a transaction nobody ends (a "hanging"
  // transaction holds back read_committed readers of that partition).
  // Without this, only the broker's transaction.partition.verification.enable
  // (KIP-890; docs/design.md, The broker) would stop such a late record. The same
  // rebuild recovers from fatal errors (fenced by a new owner, or librdkafka
  // 2.0.2's OUT_OF_ORDER_SEQUENCE after a broker restart); if another relay
  // owns the stream, BeginFencedBatch finds out.
  if (!s.txn_producers.empty()) {
    CloseStreamProducers(s);
    replaced_producers++;
  }
  fenced_batches++;
  if (probe) probe->FencedBatchesRolledBack().Increment();
  s.Rewind();
  {
    MutexLock lock(&s.mu);
    s.read_pos = s.acked = s.saved;
  }
  s.needs_reconcile = true;
  LogWarn("relay", "exactly-once batch rolled back; the next one resumes after what Kafka holds",
          {{"host", s.host_name},
           {"datastore", s.datastore},
           {"reason", reason},
           {"error", why.ToString()}});
}

}  // namespace cellar
