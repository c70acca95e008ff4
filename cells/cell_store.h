// CellStore: the store API over the sharded MySQL cells tables.
//
// Layout: logical shard s lives in database <prefix>_s<s> on the host that owns
// it (config). Each datastore D has a table cells_D there:
//   added_id   BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY  -- the shard log order
//   row_key    BINARY(16), column_name VARCHAR(64), ref_key BIGINT
//   body       LONGBLOB (body_codec.h), tombstone TINYINT
//   created_at BIGINT  -- microseconds since the epoch, UTC
//   UNIQUE KEY (row_key, column_name, ref_key)
// plus commit_order(datastore PRIMARY KEY): one row per datastore that every
// writing transaction locks first (SELECT ... FOR UPDATE). Writes to one
// (shard, datastore) therefore commit one transaction at a time, in added_id
// order, from every process: a reader that sees added_id N committed knows
// every smaller id is committed or was rolled back for good. This is what lets
// the change-log relay tail `added_id > checkpoint` without ever skipping a
// cell that commits late (see changelog/relay.h).
//
// Group commit: puts are queued per (shard, datastore) and a pool of writer
// threads per MySQL host packs everything queued into one multi-row INSERT
// transaction; each caller is answered after its batch committed.
//
// Errors (every call): InvalidArgument for a malformed request (names the bad
// part, including an unknown datastore or column; nothing is written),
// NotFound for a missing cell, Conflict when an address exists with a different body,
// Unavailable when the shard's MySQL host cannot be reached (other shards are
// unaffected), Aborted for a cell of a put_batch row whose other cell failed.
//
// Threading: every method is thread-safe and may block on MySQL. Close() (or
// the destructor) must not race with other calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "config/cluster_config.h"

namespace cellar {

class MysqlHostPool;

struct VersionQuery {
  std::optional<int64_t> max_ref;         // only ref_key <= max_ref
  std::optional<int64_t> min_ref;         // only ref_key >= min_ref
  std::optional<MicrosSinceEpoch> as_of;  // only versions created at or before as_of
  int limit = 100;                        // 1..10000
};

struct ShardLogPage {
  std::vector<Cell> cells;  // in added_id order, all columns, tombstones and expired included
  uint64_t next_after = 0;  // pass as after_added_id to continue (== input when empty)
};

struct PurgeStats {
  uint64_t deleted = 0;
  uint32_t shards_failed = 0;
};

class CellStore {
 public:
  // Connects lazily: opening never fails because a host is down.
  // The config is copied; the store keeps no reference to it.
  static std::unique_ptr<CellStore> Open(const ClusterConfig& config);
  ~CellStore();

  // Creates every shard database and its tables, idempotently. Unavailable
  // names the first host that could not be reached (the others are still done).
  [[nodiscard]] Status Init();

  // Appends one cell. The same address with an equal body again is success
  // with created=false (a retried write); with a different body, Conflict.
  [[nodiscard]] Result<PutResult> Put(const std::string& datastore, const CellWrite& cell);

  // Appends many cells. All cells of one row commit atomically (one
  // transaction on its shard): if one of them is rejected, none of that row is
  // written and its other cells report Aborted. Rows are independent of each
  // other. results[i] belongs to cells[i]. A request that is malformed as a
  // whole (unknown datastore, too many cells) fails every cell alike.
  std::vector<Result<PutResult>> PutBatch(const std::string& datastore,
                                          const std::vector<CellWrite>& cells);

  [[nodiscard]] Result<Cell> Get(const std::string& datastore, const Uuid& row,
                                 const std::string& column, int64_t ref_key);
  // The highest-ref_key unexpired version. NotFound when there is none or it is a tombstone.
  [[nodiscard]] Result<Cell> Latest(const std::string& datastore, const Uuid& row,
                                    const std::string& column);
  // Latest() of every column of the datastore that has a live value (possibly empty).
  [[nodiscard]] Result<std::vector<Cell>> Row(const std::string& datastore, const Uuid& row);
  // Unexpired versions, newest (highest ref_key) first, tombstones included.
  [[nodiscard]] Result<std::vector<Cell>> Versions(const std::string& datastore, const Uuid& row,
                                                   const std::string& column,
                                                   const VersionQuery& query);
  // Appends a tombstone at (latest ref_key + 1), or 0 for a column never written.
  [[nodiscard]] Result<PutResult> Erase(const std::string& datastore, const Uuid& row,
                                        const std::string& column);

  // Up to `limit` cells of `shard` with added_id > after_added_id, in order.
  [[nodiscard]] Result<ShardLogPage> ShardLog(const std::string& datastore, uint32_t shard,
                                              uint64_t after_added_id, int limit);
  // The highest committed added_id of the shard (0 when empty).
  [[nodiscard]] Result<uint64_t> ShardHead(const std::string& datastore, uint32_t shard);

  // Physically deletes expired versions of TTL columns on every shard.
  [[nodiscard]] Result<PurgeStats> Purge(const std::string& datastore);

  // Connection pool of the host owning `shard` (for modules that keep their
  // own tables in shard databases: relay checkpoints, index tables).
  MysqlHostPool& PoolForShard(uint32_t shard);
  const ClusterConfig& config() const;

  // Stops the writer threads; queued puts fail with Unavailable. Idempotent.
  void Close();

 private:
  struct Impl;
  explicit CellStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
