// Purger: deletes the expired versions of a datastore's TTL columns (the
// column's own `ttl`, or the datastore's default `ttl`) without losing what a
// consumer has not seen, and without leaving index entries behind.
//
// What it keeps:
//   - The relay bound. Per host stream (host, datastore) a cell is deleted
//     only if its added_id <= the relay's checkpoint (relay_checkpoint.h:
//     every cell up to it is acknowledged by Kafka). With kafka.brokers set, a
//     stream without a checkpoint has published nothing, so nothing of it is
//     deleted; the expired cells above the bound are counted as held back and
//     deleted by a later run once published. Without kafka.brokers there is no
//     relay and no bound.
//   - Index entries. Before a batch of cells is deleted, the entry each cell
//     has in a building or ready version of an index over the datastore is
//     removed (IndexWriter::RemoveEntryOf; an entry of a newer version of the
//     row's column stays). A crash in between leaves expired cells without
//     entries, which is what the index holds for expired cells anyway.
//   - One purger per host. A run purges a host only while holding the MySQL
//     named lock PurgeLockName(host database) on it (a dedicated connection:
//     it vanishes with the process); a host whose lock another purger holds
//     is skipped and reported busy.
// A broker that lost events makes the relay republish a host log from the
// beginning; cells purged before then are not republished (they had been
// published once).
//
// Errors: InvalidArgument for an unknown datastore; Unavailable when the
// index registry (on the host of shard 0) cannot be read, and then nothing is
// deleted. A host that fails is reported in its HostPurge and the others are
// still purged. Thread-safe; a Purger holds no connection between runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell_store.h"

namespace cellar {

struct HostPurge {
  std::string host;                         // mysql.hosts[].name
  std::optional<uint64_t> published_up_to;  // the relay bound used; nullopt: none (no Kafka)
  uint64_t deleted = 0;
  uint64_t held_back = 0;  // expired but not yet published by the relay: kept
  uint64_t index_entries_removed = 0;
  bool busy = false;  // another purger held the host's lock: skipped
  // The host failed. Batches finished before the failure stay deleted and
  // are not counted in `deleted`.
  std::string error;
};

struct PurgeReport {
  std::string datastore;
  uint64_t deleted = 0;
  uint64_t held_back = 0;
  uint64_t index_entries_removed = 0;
  uint32_t hosts_busy = 0;
  uint32_t hosts_failed = 0;
  std::vector<HostPurge> hosts;  // one per mysql.hosts entry, in order
};

// "cellar_purge:<host database>" (hashed to fit MariaDB's 64 characters).
std::string PurgeLockName(const std::string& host_database);

class Purger {
 public:
  // `store` is not owned and must outlive the purger.
  explicit Purger(CellStore* store) : store_(store) {}

  // Purges `datastore` on every host. `stop` (may be null) ends the run early
  // between batches: the report then says what was done and the hosts not
  // reached carry the error "stopped".
  [[nodiscard]] Result<PurgeReport> Run(const std::string& datastore,
                                        const std::atomic<bool>* stop = nullptr);

 private:
  CellStore* store_;
};

}  // namespace cellar
