// StreamClaim: the fence that keeps a relay that lost a stream from
// publishing it again (exactly-once mode, relay.exactly_once).
//
// The stream's checkpoint row (relay_checkpoint.h) carries an owner epoch.
// A relay that takes a stream over bumps the epoch (ClaimStream). Every batch
// it publishes runs inside a MySQL transaction that first locks the row and
// checks the epoch (BeginFencedBatch), produces and waits for Kafka's
// acknowledgements, then records the new position in the same transaction
// (CommitFencedBatch). So:
//  - a batch of the old owner either ends before the claim's UPDATE (the row
//    lock makes the claim wait for it; its records are in Kafka and its
//    position is committed), or finds a newer epoch and publishes nothing;
//  - if the old owner's MySQL connection dies mid-batch, the row lock goes
//    with it; but its Kafka transaction cannot commit any more once the new
//    owner's transactional producers (the same transactional.ids,
//    RelayTransactionalIds) have run InitTransactions, which the new owner does before it reads
//    what the stream already published (relay_exactly_once.cc): the broker fences the old producer
//    and aborts its open transaction, and read_committed readers never see aborted records. A batch
//    the old owner committed in Kafka but not in MySQL is found by that read and not sent again.
// Nothing here trusts the old owner to notice it lost its lock.
//
// Threading: functions are stateless; each uses the connection it is given.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"
#include "cells/mysql_client.h"
#include "changelog/relay_checkpoint.h"

namespace cellar::internal {

// Offsets per partition from which records of a stream beyond its checkpoint
// may sit in the change log (partition -> offset).
using ScanOffsets = std::map<int32_t, int64_t>;

struct StreamClaim {
  uint64_t epoch = 0;                   // this owner's epoch
  bool previous_owner_released = true;  // false: an owner may still have records in flight
  RelayCheckpoint checkpoint;           // the committed position
  ScanOffsets scan_offsets;             // empty: never recorded (first exactly-once owner)
};

// Bumps the owner epoch of (database, datastore), creating the row if needed,
// and returns the claim. Waits (innodb_lock_wait_timeout) for a batch of the
// previous owner to end. REQUIRES: EnsureCheckpointTable ran on `database`.
Result<StreamClaim> ClaimStream(MysqlConnection& conn, const std::string& database,
                                const std::string& datastore);

// Opens a transaction holding the stream's row lock. Aborted ("fenced") when
// the epoch is no longer `epoch`: another relay owns the stream; the
// transaction is then rolled back. Other errors as MysqlConnection.
Status BeginFencedBatch(MysqlConnection& conn, const std::string& database,
                        const std::string& datastore, uint64_t epoch);

// Stores the position and scan offsets and commits the batch transaction.
// REQUIRES: BeginFencedBatch succeeded on `conn`.
Status CommitFencedBatch(MysqlConnection& conn, const std::string& database,
                         const std::string& datastore, const RelayCheckpoint& cp,
                         const ScanOffsets& scan_offsets);

// Marks a clean hand-over (no records of this owner in flight) if `epoch` still
// owns the stream.
Status ReleaseStreamClaim(MysqlConnection& conn, const std::string& database,
                          const std::string& datastore, uint64_t epoch);

// "p:offset,p:offset" <-> map. Parse ignores malformed entries (they only
// widen the next scan).
std::string FormatScanOffsets(const ScanOffsets& offsets);
ScanOffsets ParseScanOffsets(const std::string& text);

}  // namespace cellar::internal
