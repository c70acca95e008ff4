#include "cells/testing/memory_cell_store.h"

#include <algorithm>
#include <set>

#include "cells/internal/cell_validation.h"
#include "cells/log_position.h"
#include "cells/shard_map.h"

namespace cellar {

void MemoryCellStore::SetUnavailable(bool unavailable) {
  MutexLock lock(&mu_);
  unavailable_ = unavailable;
}

size_t MemoryCellStore::size() const {
  MutexLock lock(&mu_);
  return cells_.size();
}

Status MemoryCellStore::CheckColumnLocked(const std::string& ds, const std::string& column) const {
  if (unavailable_) return Unavailable("memory backend: unavailable");
  // The MySQL store's own checks, so both answer bad input alike.
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* d, internal::ValidateDatastore(config_, ds));
  return internal::ValidateColumn(*d, column).status();
}

Status MemoryCellStore::CheckWrite(const std::string& ds, const CellWrite& cell) const {
  if (unavailable_) return Unavailable("memory backend: unavailable");
  // Datastore, column, ref_key, body type, size and depth: the store's checks.
  CELLAR_RETURN_IF_ERROR(internal::ValidateWrite(config_, ds, cell).status());
  auto it = cells_.find(Key{ds, cell.row_key, cell.column, cell.ref_key});
  if (it != cells_.end() && (it->second.tombstone || it->second.body != cell.body))
    return Conflict(CellAddress(ds, cell.row_key, cell.column, cell.ref_key) +
                    " exists with a different body");
  return Status::Ok();
}

PutResult MemoryCellStore::AppendLocked(const std::string& ds, const Uuid& row,
                                        const std::string& column, int64_t ref,
                                        const nlohmann::json& body, bool tombstone) {
  PutResult r;
  r.ref_key = ref;
  auto it = cells_.find(Key{ds, row, column, ref});
  if (it != cells_.end()) {
    r.shard = it->second.shard;
    r.added_id = it->second.added_id;
    r.created_at = it->second.created_at;
    return r;
  }
  Cell c;
  c.row_key = row;
  c.column = column;
  c.ref_key = ref;
  c.body = tombstone ? nlohmann::json() : body;
  c.tombstone = tombstone;
  c.created_at = NowMicros();
  c.shard = ShardForRow(row, config_.shards);
  auto& log = logs_[{ds, c.shard}];
  c.added_id = log.size() + 1;
  log.push_back(c);
  cells_.emplace(Key{ds, row, column, ref}, c);
  r.shard = c.shard;
  r.added_id = c.added_id;
  r.created_at = c.created_at;
  r.created = true;
  return r;
}

Result<PutResult> MemoryCellStore::Put(const std::string& ds, const CellWrite& cell) {
  MutexLock lock(&mu_);
  CELLAR_RETURN_IF_ERROR(CheckWrite(ds, cell));
  return AppendLocked(ds, cell.row_key, cell.column, cell.ref_key, cell.body, false);
}

std::vector<Result<PutResult>> MemoryCellStore::PutBatch(const std::string& ds,
                                                         const std::vector<CellWrite>& cells) {
  MutexLock lock(&mu_);
  std::vector<Result<PutResult>> out(cells.size(), Result<PutResult>(Aborted("not attempted")));
  std::map<Uuid, std::vector<size_t>> rows;
  for (size_t i = 0; i < cells.size(); ++i) rows[cells[i].row_key].push_back(i);
  for (const auto& [row, idx] : rows) {
    std::optional<size_t> bad;
    Status why;
    for (size_t i : idx) {
      Status s = CheckWrite(ds, cells[i]);
      if (!s.ok()) {
        bad = i;
        why = s;
        break;
      }
    }
    for (size_t i : idx) {
      if (bad) {
        out[i] = i == *bad ? Result<PutResult>(why)
                           : Result<PutResult>(Aborted("another cell of the row failed"));
      } else {
        out[i] = AppendLocked(ds, row, cells[i].column, cells[i].ref_key, cells[i].body, false);
      }
    }
  }
  return out;
}

std::vector<Cell> MemoryCellStore::VersionsLocked(const std::string& ds, const Uuid& row,
                                                  const std::string& column) const {
  std::vector<Cell> out;
  auto it = cells_.lower_bound(Key{ds, row, column, 0});
  for (; it != cells_.end(); ++it) {
    const auto& [kds, krow, kcol, kref] = it->first;
    if (kds != ds || krow != row || kcol != column) break;
    out.push_back(it->second);
  }
  std::reverse(out.begin(), out.end());  // newest first
  return out;
}

Status MemoryCellStore::CheckRead(const std::string& ds, const ReadOptions& read) const {
  if (read.after.empty() || config_.FindDatastore(ds) == nullptr) return Status::Ok();
  return DecodeLogPosition(config_, ds, read.after).status();
}

Result<Cell> MemoryCellStore::Get(const std::string& ds, const Uuid& row, const std::string& column,
                                  int64_t ref_key, const ReadOptions& read) {
  CELLAR_RETURN_IF_ERROR(CheckRead(ds, read));
  MutexLock lock(&mu_);
  CELLAR_RETURN_IF_ERROR(CheckColumnLocked(ds, column));
  auto it = cells_.find(Key{ds, row, column, ref_key});
  if (it == cells_.end()) return NotFound("no cell " + CellAddress(ds, row, column, ref_key));
  return it->second;
}

Result<Cell> MemoryCellStore::Latest(const std::string& ds, const Uuid& row,
                                     const std::string& column, const ReadOptions& read) {
  CELLAR_RETURN_IF_ERROR(CheckRead(ds, read));
  MutexLock lock(&mu_);
  CELLAR_RETURN_IF_ERROR(CheckColumnLocked(ds, column));
  auto v = VersionsLocked(ds, row, column);
  if (v.empty() || v[0].tombstone) return NotFound("no live cell at " + column);
  return v[0];
}

Result<std::vector<Cell>> MemoryCellStore::Row(const std::string& ds, const Uuid& row,
                                               const ReadOptions& read) {
  CELLAR_RETURN_IF_ERROR(CheckRead(ds, read));
  MutexLock lock(&mu_);
  if (unavailable_) return Unavailable("memory backend: unavailable");
  const DatastoreConfig* d = config_.FindDatastore(ds);
  if (d == nullptr) return InvalidArgument("unknown datastore '" + ds + "'");
  std::vector<Cell> out;
  for (const auto& col : d->columns) {
    auto v = VersionsLocked(ds, row, col.name);
    if (!v.empty() && !v[0].tombstone) out.push_back(v[0]);
  }
  return out;
}

Result<std::vector<Cell>> MemoryCellStore::Versions(const std::string& ds, const Uuid& row,
                                                    const std::string& column,
                                                    const VersionQuery& q,
                                                    const ReadOptions& read) {
  CELLAR_RETURN_IF_ERROR(CheckRead(ds, read));
  MutexLock lock(&mu_);
  CELLAR_RETURN_IF_ERROR(CheckColumnLocked(ds, column));
  CELLAR_RETURN_IF_ERROR(ValidateVersionQuery(q));
  std::vector<Cell> out;
  for (Cell& c : VersionsLocked(ds, row, column)) {
    if (q.max_ref && c.ref_key > *q.max_ref) continue;
    if (q.min_ref && c.ref_key < *q.min_ref) continue;
    if (q.as_of && c.created_at > *q.as_of) continue;
    if (q.since && c.created_at < *q.since) continue;
    if (static_cast<int>(out.size()) == q.limit) break;
    out.push_back(std::move(c));
  }
  return out;
}

Result<PutResult> MemoryCellStore::Erase(const std::string& ds, const Uuid& row,
                                         const std::string& column,
                                         std::optional<int64_t> expected_ref_key) {
  MutexLock lock(&mu_);
  CELLAR_RETURN_IF_ERROR(CheckColumnLocked(ds, column));
  if (expected_ref_key && *expected_ref_key < 0)
    return InvalidArgument("expected_ref_key must be >= 0");
  auto v = VersionsLocked(ds, row, column);  // newest first
  auto already = [&](const Cell& t) {
    PutResult r;
    r.shard = t.shard;
    r.added_id = t.added_id;
    r.ref_key = t.ref_key;
    r.created_at = t.created_at;
    r.created = false;
    return r;
  };
  if (!v.empty() && v[0].tombstone) {
    if (!expected_ref_key) return already(v[0]);
    const int64_t k = *expected_ref_key;
    const bool directly_above =
        v[0].ref_key > k && (v[0].ref_key - 1 == k || (v.size() > 1 && v[1].ref_key == k));
    if (v[0].ref_key == k || directly_above) return already(v[0]);
  }
  if (expected_ref_key && (v.empty() || v[0].ref_key != *expected_ref_key))
    return Conflict("erase expected latest ref_key " + std::to_string(*expected_ref_key) +
                    ", but the latest is " +
                    (v.empty() ? std::string("none") : std::to_string(v[0].ref_key)));
  const int64_t ref = v.empty() ? 0 : v[0].ref_key + 1;
  return AppendLocked(ds, row, column, ref, nlohmann::json(), true);
}

Result<ShardLogPage> MemoryCellStore::ShardLog(const std::string& ds, uint32_t shard,
                                               uint64_t after, int limit) {
  MutexLock lock(&mu_);
  if (unavailable_) return Unavailable("memory backend: unavailable");
  if (config_.FindDatastore(ds) == nullptr) return InvalidArgument("unknown datastore");
  if (shard >= config_.shards) return InvalidArgument("shard out of range");
  if (limit < 1 || limit > config_.limits.max_log_limit) return InvalidArgument("bad limit");
  ShardLogPage page;
  page.next_after = after;
  auto it = logs_.find({ds, shard});
  if (it == logs_.end()) return page;
  for (const Cell& c : it->second) {
    if (c.added_id <= after) continue;
    if (static_cast<int>(page.cells.size()) == limit) break;
    page.cells.push_back(c);
    page.next_after = c.added_id;
  }
  return page;
}

Status MemoryCellStore::CheckReady() {
  MutexLock lock(&mu_);
  return unavailable_ ? Unavailable("memory backend: unavailable") : Status::Ok();
}

}  // namespace cellar
