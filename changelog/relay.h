// Relay: publishes every committed cell to Kafka, in added_id order per shard,
// without ever losing one.
//
// How no cell is skipped. The cells table is the outbox and added_id its
// order. A relay could lose a cell if it read `added_id > 99`, saw 101 and
// moved on while the transaction holding 100 had not committed yet (InnoDB
// assigns auto-increment values at INSERT time, not at COMMIT). Cellar makes
// that impossible at the source: every writing transaction first locks its
// (shard, datastore) row in commit_order (cells/cell_store.h), so the
// transactions of one shard commit strictly one after another, and a
// transaction allocates its added_ids only while holding that lock. When a
// reader sees added_id N committed, every transaction that allocated a smaller
// id has already committed or rolled back; a rolled-back id is a permanent gap
// that no one can fill. Reading `added_id > checkpoint` is therefore complete.
// (Writes that bypass the store and its lock would void this guarantee.)
//
// How nothing is lost after reading. The checkpoint (relay_checkpoint.h) moves
// to N only once Kafka acknowledged every cell up to N (idempotent producer,
// acks=all). A crash re-publishes from the checkpoint: consumers may see
// duplicates, never gaps. If a delivery fails or the producer hits a fatal
// error, the relay rewinds every shard to its acknowledged position.
//
// One owner per shard. A relay publishes a shard only while it holds the MySQL
// named lock GET_LOCK('cellar_relay:<shard database>') on the shard's host. A
// relay that dies loses its connections and so its locks; another relay takes
// the shards over on its next ownership round (relay.lock_retry_ms). Live
// relays also hold one of 64 member locks on the first host; each relay owns
// at most ceil(shards / live relays), releasing extra shards (after flushing
// them) when another relay joins, so two relays split the shards.
//
// Kafka down: writes are unaffected (cells are already durable); the producer
// queues and retries, the relay logs once per outage and catches up.
//
// Threading: Start/Stop from one thread; stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"

namespace cellar {

struct RelayStats {
  uint64_t published = 0;                      // records handed to the producer
  uint64_t acknowledged = 0;                   // records Kafka acknowledged
  uint64_t rewinds = 0;                        // times a shard was rewound after a failed delivery
  uint64_t republished_after_broker_loss = 0;  // shards reset because the broker lost events
  std::vector<uint32_t> owned_shards;
};

class Relay {
 public:
  // `store` is not owned and must outlive the relay. relay_id names this
  // process in logs.
  Relay(CellStore* store, std::string relay_id);
  ~Relay();

  // Creates the Kafka producer, the topics (kafka.partitions each) and the
  // checkpoint tables of reachable shards, then starts publishing in the
  // background. InvalidArgument without kafka.brokers; Unavailable if Kafka
  // does not answer.
  Status Start();
  // Stops publishing, waits (bounded) for outstanding acknowledgements, saves
  // checkpoints and releases every shard. Idempotent.
  void Stop();

  RelayStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Per (shard, datastore) view for `cellar relay status`.
struct RelayShardStatus {
  uint32_t shard = 0;
  std::string datastore;
  uint64_t checkpoint = 0;
  uint64_t head = 0;  // newest added_id
  uint64_t lag = 0;   // cells committed but not yet acknowledged by Kafka
  MicrosSinceEpoch checkpoint_updated_at = 0;
  bool owned = false;  // a relay holds the shard's lock
  std::string error;   // non-empty when the shard could not be read
};
std::vector<RelayShardStatus> ReadRelayStatus(CellStore& store);

// Lock name of a shard's relay ownership (at most 64 characters).
std::string RelayLockName(const std::string& shard_database);

}  // namespace cellar
