// Moving one logical shard to another host: `cellar shards move`.
//
// A shard's cells are the rows `shard = S` of its host's cells tables (one per
// datastore); index entries and pointers of the shard are the rows `shard = S`
// of the host's idx_* tables. A move has two steps, with a config roll between
// them:
//
// 1. CopyAndFreezeShard (config: the current one, S on its source host).
//    - copies S's cells to the target host in their source log order, in
//      chunks, each chunk in one fenced transaction on the target together with
//      its progress row (table shard_move_progress), so a rerun resumes;
//    - catches up while writers keep writing S on the source, pass after pass;
//    - freezes S on the source: frozen_shards gets S and a BEFORE INSERT
//      trigger on the source's cells tables rejects S's rows (writers answer
//      Unavailable "shard S is frozen for a move"), then waits for the
//      source's open writers (write_fence.h), so the last pass is complete;
//    - verifies the count and a digest (address, body, tombstone, created_at)
//      of S's cells on both hosts;
//    - returns the config roll: the hosts' new shard lists.
//    Between this step and the roll, writes to S are unavailable; reads of S
//    still answer from the source.
// 2. FinishShardMove (config: the new one, S on the target host). Checks that
//    the config moved S to the target, verifies again, copies S's index
//    entries and pointers to the target (INSERT IGNORE: rows the index worker
//    already wrote there win), deletes S's rows from the source's cells and
//    idx_* tables and unfreezes S.
//
// The moved cells get new added_ids in the target's log, so the relay
// publishes them again: consumers see each moved cell once more (counted as
// cells_copied), never a gap.
//
// Threading: one move per shard at a time; other shards keep working.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

struct ShardMoveReport {
  uint32_t shard = 0;
  std::string from_host, to_host;
  uint64_t cells_copied = 0;         // cells inserted into the target by this call
  int catch_up_passes = 0;           // copy passes while writers were live
  uint64_t cells_verified = 0;       // cells of S on both hosts, equal by count and digest
  std::string digest;                // hex, over every cell of S
  uint64_t index_rows_copied = 0;    // FinishShardMove: idx_* rows copied to the target
  uint64_t source_rows_deleted = 0;  // FinishShardMove: cells and idx_* rows deleted
  std::string from_shards_after, to_shards_after;  // the config roll (ShardList form)
};

using MoveProgress = std::function<void(const std::string&)>;

// Step 1. InvalidArgument for a shard out of range, an unknown host or a
// target that already owns S; FailedPrecondition when verification fails
// (nothing is deleted; S stays frozen); Unavailable when a host is down.
Result<ShardMoveReport> CopyAndFreezeShard(const ClusterConfig& current, uint32_t shard,
                                           const std::string& to_host,
                                           const MoveProgress& progress = {});

// Step 2. `from_host` names the source. FailedPrecondition when `updated`
// does not put S on a host other than `from_host`, when S is not frozen on the
// source, or when verification fails (nothing is deleted).
Result<ShardMoveReport> FinishShardMove(const ClusterConfig& updated, uint32_t shard,
                                        const std::string& from_host,
                                        const MoveProgress& progress = {});

}  // namespace cellar
