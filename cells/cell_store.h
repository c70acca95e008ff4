// CellStore: the store API over the MySQL (MariaDB) hosts.
//
// Layout. Logical shards (shard_map.h) are the unit of hashing, ownership,
// routing and partitioning; a host owns a range of them (config). They are not
// the unit of storage: every shard a host owns shares one table per datastore
// D in the host's database <prefix>_<host name> (ClusterConfig::HostDatabase):
//   cells_D:
//     added_id   BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY  -- the host's log
//     shard      INT UNSIGNED                                -- logical shard of row_key
//     row_key    BINARY(16), column_name VARCHAR(64), ref_key BIGINT
//     body       LONGBLOB (body_codec.h), tombstone TINYINT
//     created_at BIGINT  -- microseconds since the epoch, UTC
//     UNIQUE KEY (row_key, column_name, ref_key), KEY (shard, added_id)
// plus write_fence (internal/write_fence.h): one row per writer connection.
// Why one table per host: a group commit writes every waiting cell of a host,
// whatever its shard, in one multi-row INSERT and one COMMIT.
//
// The host log is gap-free for its readers. HostLog() and ShardLog() return a
// cell only once no cell with a smaller added_id can still commit, without a
// lock that orders writers: writers never wait for each other's commits, and a
// reader waits (bounded) for the writers that were open when it read. The
// argument is in internal/write_fence.h.
//
// Group commit: puts of every shard of a host wait in one queue; a pool of
// writer threads per host packs everything waiting into one transaction; each
// caller is answered after its transaction committed.
//
// Engine: MariaDB 10.5 or newer (INSERT ... RETURNING). Another server is
// refused when a connection is made (FailedPrecondition).
//
// Errors (every call): InvalidArgument for a malformed request (names the bad
// part, including an unknown datastore or column; nothing is written),
// NotFound for a missing cell, Conflict when an address exists with a different body,
// Unavailable when the shard's MySQL host cannot be reached (other hosts' shards
// are unaffected), Aborted for a cell of a put_batch row whose other cell failed.
//
// Threading: every method is thread-safe and may block on MySQL. Close() (or
// the destructor) must not race with other calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/cell_service.h"
#include "config/cluster_config.h"

namespace cellar {

class MetricsRegistry;  // base/metrics.h

class MysqlConnection;
class MysqlHostPool;
class TopologyView;  // cells/host_topology.h

// How a log read returns bodies.
enum class LogBodies {
  kDocument,  // parsed, in Cell::body
  // As compact JSON text in HostLogPage::body_texts, Cell::body left null:
  // for readers that pass bodies on as text (the relay), which then skip
  // building a document per cell (DecodeBodyToJsonText).
  kJsonText,
};

struct HostLogPage {
  std::vector<Cell> cells;  // in added_id order, all columns and shards
  // LogBodies::kJsonText only: body_texts[i] is cells[i]'s body as compact
  // JSON text, exactly cells[i].body.dump() had it been parsed ("" for a
  // tombstone). Empty with LogBodies::kDocument.
  std::vector<std::string> body_texts;
  uint64_t next_after = 0;  // pass as after_added_id to continue (>= input)
  // True when the page stopped early because a writing transaction on the host
  // stayed open past the read's wait: the cells after it are not final yet.
  bool held_by_open_writer = false;
};

struct PurgeStats {
  uint64_t deleted = 0;
  uint32_t shards_failed = 0;
  // Expired versions kept because their added_id is above the purge's
  // max_added_id (PurgeOptions): e.g. not yet published by the relay.
  uint64_t held_back = 0;
};

// An expired cell version a purge is about to delete.
struct PurgedCell {
  uint64_t added_id = 0;
  uint32_t shard = 0;
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;
  MicrosSinceEpoch created_at = 0;
};

struct PurgeOptions {
  // Never delete a cell with a higher added_id (a position in the host's log);
  // nullopt: no bound. retention/purger.h passes the relay's checkpoint.
  std::optional<uint64_t> max_added_id;
  // Called with each batch (in added_id order, at most batch_cells) before it
  // is deleted; an error stops the purge of the host and that batch stays.
  // May be empty.
  std::function<Status(const std::vector<PurgedCell>&)> before_delete;
  int batch_cells = 5000;  // cells selected and deleted per round, 1..100000
};

class CellStore : public CellService {
 public:
  // Connects lazily: opening never fails because a host is down.
  // The config is copied; the store keeps no reference to it. The group
  // commit's metrics (cellar_group_commit_*{host}, cells/internal/
  // group_commit_probe.h) go to `metrics`, which is not owned and must
  // outlive the store; nullptr: a registry of the store's own, not exported.
  static std::unique_ptr<CellStore> Open(const ClusterConfig& config,
                                         MetricsRegistry* metrics = nullptr);
  ~CellStore() override;

  // Creates every host database and its tables, idempotently. Unavailable
  // names the first host that could not be reached (the others are still done).
  // FailedPrecondition (from CheckLayout) when a host holds the old layout.
  [[nodiscard]] Status Init();

  // OK when no host holds cells in the per-shard layout of an older Cellar
  // (databases <prefix>_s<shard>); FailedPrecondition naming `cellar migrate`
  // otherwise. Unavailable when a host cannot be reached. Long-running
  // processes call it at start and refuse to run on an old cluster.
  [[nodiscard]] Status CheckLayout();

  // Appends one cell. The same address with an equal body again is success
  // with created=false (a retried write); with a different body, Conflict.
  [[nodiscard]] Result<PutResult> Put(const std::string& datastore, const CellWrite& cell) override;

  // Put without waiting: a caller may keep many puts in flight, so the group
  // commit fills its transactions from few callers (a caller blocked in Put()
  // offers one cell at a time; docs/design.md, Storage, "Puts in flight").
  // `done` is called exactly once with what Put() would have returned:
  //  - on this thread, before PutAsync returns, for invalid input
  //    (InvalidArgument, nothing written) and when the store is closed
  //    (Unavailable);
  //  - otherwise on the answering thread of the cell's host's group commit,
  //    after the transaction committed or failed.
  // `done` must not block (it holds up every answer of the host) and must not
  // call Put()/PutBatch()/Erase() (the answering thread waiting on itself); it may call
  // PutAsync(). Close() returns only after every accepted put was answered.
  // Puts in flight together commit in any order; each put's result is
  // final when `done` runs.
  using PutCallback = std::function<void(Result<PutResult>)>;
  void PutAsync(const std::string& datastore, const CellWrite& cell, PutCallback done);

  // Appends many cells. All cells of one row commit atomically (one
  // transaction on its shard): if one of them is rejected, none of that row is
  // written and its other cells report Aborted. Rows are independent of each
  // other. results[i] belongs to cells[i]. A request that is malformed as a
  // whole (unknown datastore, too many cells) fails every cell alike.
  [[nodiscard]] std::vector<Result<PutResult>> PutBatch(
      const std::string& datastore, const std::vector<CellWrite>& cells) override;

  [[nodiscard]] Result<Cell> Get(const std::string& datastore, const Uuid& row,
                                 const std::string& column, int64_t ref_key,
                                 const ReadOptions& read = {}) override;
  // The highest-ref_key unexpired version. NotFound when there is none or it is a tombstone.
  [[nodiscard]] Result<Cell> Latest(const std::string& datastore, const Uuid& row,
                                    const std::string& column,
                                    const ReadOptions& read = {}) override;
  // Get() and Latest() with the stored body printed as JSON text, no document built.
  [[nodiscard]] Result<CellText> GetText(const std::string& datastore, const Uuid& row,
                                         const std::string& column, int64_t ref_key,
                                         const ReadOptions& read = {}) override;
  [[nodiscard]] Result<CellText> LatestText(const std::string& datastore, const Uuid& row,
                                            const std::string& column,
                                            const ReadOptions& read = {}) override;
  // Latest() of every column of the datastore that has a live value (possibly empty).
  [[nodiscard]] Result<std::vector<Cell>> Row(const std::string& datastore, const Uuid& row,
                                              const ReadOptions& read = {}) override;
  // Unexpired versions, newest (highest ref_key) first, tombstones included.
  [[nodiscard]] Result<std::vector<Cell>> Versions(const std::string& datastore, const Uuid& row,
                                                   const std::string& column,
                                                   const VersionQuery& query,
                                                   const ReadOptions& read = {}) override;
  // Row() and Versions() with the stored bodies printed as JSON text.
  [[nodiscard]] Result<std::vector<CellText>> RowText(const std::string& datastore, const Uuid& row,
                                                      const ReadOptions& read = {}) override;
  [[nodiscard]] Result<std::vector<CellText>> VersionsText(const std::string& datastore,
                                                           const Uuid& row,
                                                           const std::string& column,
                                                           const VersionQuery& query,
                                                           const ReadOptions& read = {}) override;
  // Erases a column: appends a tombstone, which hides every older version
  // from Latest() and Row(). Idempotent, so retries write one tombstone.
  // "The latest version" is the one Latest() would consider: the highest
  // ref_key among unexpired versions (tombstones included).
  // Without expected_ref_key:
  //   - the latest version is a tombstone: nothing is written; the result is
  //     that tombstone with created=false (a retried or repeated erase);
  //   - otherwise a tombstone is written above every stored version, expired
  //     or not (max stored ref_key + 1; 0 for a column never written), with
  //     created=true.
  // With expected_ref_key K (erase exactly that version), >= 0:
  //   - the latest version is K and live: a tombstone as above (K + 1 unless
  //     expired versions sit above K), created=true;
  //   - the latest version is K and a tombstone, or a tombstone directly
  //     above K (at K + 1, or with K the version below it: this erase,
  //     retried): nothing is written, that tombstone with created=false;
  //   - otherwise Conflict naming the actual latest ref_key (or that the
  //     column has no version); nothing is written.
  // The check and the write are one transaction that locks the column's top
  // versions, so concurrent erases of one column write one tombstone. A
  // concurrent put that commits a ref_key above K + 1 in the same instant is
  // not seen by the check (it becomes the latest version, above the tombstone).
  // An erase whose COMMIT was lost (connection dropped before the answer) is
  // retried by the store and then reports created=false with the tombstone it
  // wrote. InvalidArgument for a negative expected_ref_key.
  [[nodiscard]] Result<PutResult> Erase(
      const std::string& datastore, const Uuid& row, const std::string& column,
      std::optional<int64_t> expected_ref_key = std::nullopt) override;

  // Up to `limit` cells of `shard` with added_id > after_added_id, in order.
  // added_ids are positions in the host's log (other shards' cells sit in
  // between). No cell of the shard with added_id <= next_after can commit after
  // this call: the read waits up to 1 s for open writers of the host, and
  // returns an empty page (next_after unchanged) if one is still open.
  [[nodiscard]] Result<ShardLogPage> ShardLog(const std::string& datastore, uint32_t shard,
                                              uint64_t after_added_id, int limit) override;
  // OK when every host answers a trivial query; otherwise Unavailable naming
  // each host that did not and the shards it owns. Used by readiness checks
  // (cellard's /readyz).
  [[nodiscard]] Status CheckReady() override;
  // The highest committed added_id of the shard (0 when empty).
  [[nodiscard]] Result<uint64_t> ShardHead(const std::string& datastore, uint32_t shard);

  // The host log: up to `limit` cells of every shard of mysql.hosts[host] with
  // added_id > after_added_id, in added_id order. No cell with added_id <=
  // next_after can commit after this call, so a reader that continues from
  // next_after never skips one (internal/write_fence.h). A contiguous run of
  // ids returns at once; a gap waits up to 1 s for the host's open writers,
  // and if one is still open the page ends before the gap
  // (held_by_open_writer). InvalidArgument for an unknown datastore, a host
  // index out of range or a limit outside 1..limits.max_log_limit. `bodies`
  // says how bodies come back (LogBodies).
  [[nodiscard]] Result<HostLogPage> HostLog(const std::string& datastore, size_t host,
                                            uint64_t after_added_id, int limit,
                                            LogBodies bodies = LogBodies::kDocument);
  // The highest committed added_id of the host's log (0 when empty).
  [[nodiscard]] Result<uint64_t> HostHead(const std::string& datastore, size_t host);
  // A page of the latest version of each (row, column) stored on
  // mysql.hosts[host], in (row_key bytes, column) order after (after_row,
  // after_column) (after_row empty: from the start), at most `limit`
  // (1..10000) pairs; tombstones and versions past their TTL included, cells
  // of shards the host no longer owns too (the caller tells them apart). For
  // maintenance scans that hold one page at a time (CheckIndex). Errors as
  // HostHead; InvalidArgument for a limit out of range.
  [[nodiscard]] Result<std::vector<Cell>> HostLatestPage(const std::string& datastore, size_t host,
                                                         const std::string& after_row,
                                                         const std::string& after_column,
                                                         int limit);
  // The created_at of the committed cell with the smallest added_id above
  // `after_added_id` in the host's log (a relay stream's oldest unpublished
  // cell); 0 when there is none. Does not wait for open writers: a cell they
  // commit later is not seen. Errors as HostHead.
  [[nodiscard]] Result<MicrosSinceEpoch> HostLogCreatedAt(const std::string& datastore, size_t host,
                                                          uint64_t after_added_id);

  // Physically deletes expired versions of TTL columns on every host
  // (shards_failed counts the shards of hosts that failed), without any bound:
  // it knows nothing of the relay. A cluster with Kafka purges through
  // retention/purger.h, which never deletes what the relay has not published.
  [[nodiscard]] Result<PurgeStats> Purge(const std::string& datastore);
  // The purge of mysql.hosts[host] alone, under `options`. Expired: created_at
  // older than the column's ttl_ms at the start of the call. Unavailable when
  // the host cannot be reached (cells of batches already done stay deleted);
  // InvalidArgument for an unknown datastore, a host index out of range or
  // batch_cells outside 1..100000.
  [[nodiscard]] Result<PurgeStats> PurgeHost(const std::string& datastore, size_t host,
                                             const PurgeOptions& options);

  // The index in mysql.hosts of the host owning `shard` now: where the
  // config puts it unless `cellar shards move` placed it elsewhere since
  // (cells/shard_placement.h; learned within mysql.topology_refresh).
  // Modules keeping rows of a shard in host databases (index entries and
  // positions) resolve its host here, never from the config.
  // REQUIRES: shard < config().shards.
  size_t HostOfShard(uint32_t shard) const;
  // The database of HostOfShard(shard).
  std::string DatabaseOfShard(uint32_t shard) const;
  // Connection pool of the host owning `shard` now (HostOfShard).
  MysqlHostPool& PoolForShard(uint32_t shard);
  // Connection pool of mysql.hosts[host]. REQUIRES: host < mysql.hosts.size().
  MysqlHostPool& PoolForHost(size_t host);
  // Runs `read` on a server of the host owning `shard`, for modules that read
  // their own tables in host databases (index entries), with the placement of
  // the store's reads (ReadPreference, cells/cell.h):
  //  - kPrimary: on the primary.
  //  - kReplica: on one of the host's replicas that answered the last
  //    topology refresh (taking turns; counted in cellar_replica_reads_total),
  //    or on the primary when the host has none, the replica cannot be
  //    connected to, or `read` fails Unavailable there.
  // With `catch_up_ms` (kReplica only), the replica is used only once it has
  // applied everything the host's primary had committed when it was asked
  // (its @@gtid_binlog_pos, then MASTER_GTID_WAIT on the replica), waited for
  // up to that many milliseconds (0: no wait, only a check); otherwise the
  // primary answers. Either way `read` then sees every write the primary
  // committed before this call.
  // On the primary, `read` failing Unavailable runs once more on a fresh
  // connection after a topology refresh (as the store's own reads), so
  // `read` may run up to three times and must start over each time.
  // Returns `read`'s status, or Unavailable naming the shard when the
  // primary cannot be reached. REQUIRES: shard < shards.
  [[nodiscard]] Status ReadShardHost(uint32_t shard, ReadPreference preference,
                                     std::optional<int64_t> catch_up_ms,
                                     const std::function<Status(MysqlConnection&)>& read);
  const ClusterConfig& config() const;
  // Which server of each host is primary (cells/host_topology.h): the pools
  // and writers above follow it; modules that open their own connections to a
  // host's primary use its PrimaryEndpoint and PrimaryCheck.
  TopologyView& topology();

  // Stops the writer threads; queued puts fail with Unavailable. Idempotent.
  void Close();

 private:
  // Get, Latest and Versions; with `body_texts` non-null each cell's body is
  // left null and its JSON text appended there instead (RowToCell).
  Result<Cell> GetCell(const std::string& datastore, const Uuid& row, const std::string& column,
                       int64_t ref_key, const ReadOptions& read, std::string* body_text);
  Result<Cell> LatestCell(const std::string& datastore, const Uuid& row, const std::string& column,
                          const ReadOptions& read, std::string* body_text);
  Result<std::vector<Cell>> VersionCells(const std::string& datastore, const Uuid& row,
                                         const std::string& column, const VersionQuery& query,
                                         const ReadOptions& read,
                                         std::vector<std::string>* body_texts);

  struct Impl;
  explicit CellStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
