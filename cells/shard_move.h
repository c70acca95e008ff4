// Moving one logical shard to another host while every process runs:
// `cellar shards move --shard S --to HOST`.
//
// A shard's cells are the rows `shard = S` of its host's cells tables (one per
// datastore); index entries and pointers of the shard are the rows `shard = S`
// of the host's idx_* tables; its index positions, rows of index_positions.
// Where S lives is the config's host list unless a move placed it elsewhere
// (shard_placement.h: rows in table shard_placement that every process reads
// with its topology, mysql.topology_refresh). MoveShard, in one call:
//
//  1. copies S's cells to the target in their source log order, in chunks,
//     each chunk in one fenced transaction on the target with its progress
//     row (table shard_move_progress), so a rerun resumes; pass after pass
//     while writers keep writing S on the source;
//  2. freezes S on the source: frozen_shards gets S, and BEFORE triggers on
//     its cells tables (insert) and idx_* tables (insert, update, delete)
//     refuse S's rows ('cellar-frozen-shard'); creating a trigger waits for
//     the transactions that wrote its table, and the write fence
//     (write_fence.h) for the cell writers, so the last pass is complete.
//     From here until step 5, writes to S answer Unavailable (retryable);
//  3. copies the last cells and verifies count and digest (address, body,
//     tombstone, created_at) of S's cells on both hosts;
//  4. copies S's idx_* rows to the target (nobody writes them there yet);
//  5. unfreezes S on the target (a shard moving back) and records the
//     placement (S on the target, move_seq one above any host's) in both
//     hosts' databases. A writer refused by the source's freeze re-reads the
//     placement and goes to the target (the group committer does so for
//     cells; index workers retry), so a process with a stale view cannot
//     write S on the source;
//  6. waits two topology refreshes, so every running process reads S on the
//     target, verifies again and deletes S's rows from the source's cells,
//     idx_* and index_positions tables. S stays frozen on the source: the
//     fence for any writer that still has the old placement.
//
// The moved cells get new added_ids in the target's log, so the relay
// publishes them again: consumers see each moved cell once more (counted as
// cells_copied), never a gap. A position token issued before the move names
// the source's log and is refused after it, with a message saying so.
// The mover's sessions set @cellar_shard_move, which the triggers let pass.
//
// Threading: one move per shard at a time; other shards keep working.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar {

struct ShardMoveReport {
  uint32_t shard = 0;
  std::string from_host, to_host;
  uint64_t cells_copied = 0;         // cells inserted into the target by this call
  int catch_up_passes = 0;           // copy passes while writers were live
  uint64_t cells_verified = 0;       // cells of S on both hosts, equal by count and digest
  std::string digest;                // hex, over every cell of S
  uint64_t index_rows_copied = 0;    // idx_* rows copied to the target
  uint64_t source_rows_deleted = 0;  // cells, idx_* and index_positions rows deleted
  uint64_t move_seq = 0;             // the placement's sequence number of this move
  int64_t frozen_ms = 0;             // from the freeze to the placement: writes to S refused
};

// Called with a line per step, on the caller's thread; the steps' lines start
// with "copy pass", "frozen", "verified", "placed", "deleted".
using MoveProgress = std::function<void(const std::string&)>;

// Moves `shard` to host `to_host` (steps 1-6 above). InvalidArgument for a
// shard out of range, an unknown host or a shard already on `to_host`;
// FailedPrecondition when verification fails (nothing is deleted, S stays
// frozen on the source: rerun the command once the cause is fixed);
// Unavailable when a host cannot be reached (rerun: every step resumes; a
// move that placed S but did not delete it from the source is finished by
// a rerun, which then reports only source_rows_deleted).
Result<ShardMoveReport> MoveShard(const ClusterConfig& config, uint32_t shard,
                                  const std::string& to_host, const MoveProgress& progress = {});

// The host index of every shard as the hosts' placement rows say now (every
// host's current primary is asked). Unavailable when a host cannot be reached.
Result<std::vector<uint32_t>> CurrentShardHosts(const ClusterConfig& config);

// Adds the freeze triggers to `table` (an idx_* table with a shard column in
// `database`) when the host has frozen shards, so a table created after a
// move is fenced too. Called where index tables are created.
[[nodiscard]] Status FenceNewShardTable(MysqlConnection& conn, const std::string& database,
                                        const std::string& table);

}  // namespace cellar
