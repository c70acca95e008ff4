#include "cells/internal/cells_purge.h"

#include <algorithm>
#include <vector>

#include "base/time.h"

namespace cellar::internal {
namespace {

// Ids deleted per DELETE statement: always this many placeholders (a short
// chunk repeats its last id), so one prepared statement serves every chunk.
constexpr size_t kDeleteChunk = 100;

}  // namespace

Status PurgeCellsTable(MysqlConnection& conn, const std::string& qualified_table,
                       const DatastoreConfig& ds, const PurgeOptions& options, PurgeStats* stats) {
  // "(column_name = ? AND created_at < ?) OR ..." over the TTL columns, with
  // each column's cutoff taken once, now.
  const MicrosSinceEpoch now = NowMicros();
  std::string expired;
  std::vector<SqlParam> expired_params;
  expired_params.reserve(2 * ds.columns.size());
  for (const ColumnConfig& col : ds.columns) {
    if (col.ttl_ms <= 0) continue;
    expired += std::string(expired.empty() ? "" : " OR ") + "(column_name = ? AND created_at < ?)";
    expired_params.push_back(col.name);
    expired_params.push_back(now - col.ttl_ms * 1000);
  }
  if (expired.empty()) return Status::Ok();  // no column expires
  const uint64_t bound = options.max_added_id.value_or(UINT64_MAX);
  const std::string select =
      "SELECT added_id, shard, row_key, column_name, ref_key, created_at FROM " + qualified_table +
      " WHERE added_id > ? AND added_id <= ? AND (" + expired + ") ORDER BY added_id LIMIT ?";
  std::string marks;
  for (size_t i = 0; i < kDeleteChunk; ++i) marks += i ? ", ?" : "?";
  const std::string del = "DELETE FROM " + qualified_table + " WHERE added_id IN (" + marks + ")";

  uint64_t after = 0;
  while (true) {
    std::vector<SqlParam> params;
    params.reserve(3 + expired_params.size());
    params.emplace_back(after);
    params.emplace_back(bound);
    params.insert(params.end(), expired_params.begin(), expired_params.end());
    params.push_back(int64_t{options.batch_cells});
    CELLAR_ASSIGN_OR_RETURN(auto rows, conn.Query(select, params));
    if (rows.empty()) break;
    std::vector<PurgedCell> batch;
    batch.reserve(rows.size());
    for (const SqlRow& r : rows) {
      PurgedCell c;
      c.added_id = r.Uint(0);
      c.shard = static_cast<uint32_t>(r.Uint(1));
      c.row_key = Uuid::FromBytes(r.Bytes(2));
      c.column = r.Bytes(3);
      c.ref_key = r.Int(4);
      c.created_at = r.Int(5);
      batch.push_back(std::move(c));
    }
    if (options.before_delete) CELLAR_RETURN_IF_ERROR(options.before_delete(batch));
    for (size_t i = 0; i < batch.size(); i += kDeleteChunk) {
      std::vector<SqlParam> ids;
      ids.reserve(kDeleteChunk);
      for (size_t k = 0; k < kDeleteChunk; ++k)
        ids.push_back(batch[std::min(i + k, batch.size() - 1)].added_id);
      CELLAR_ASSIGN_OR_RETURN(uint64_t n, conn.Execute(del, ids));
      stats->deleted += n;
    }
    after = batch.back().added_id;
    if (batch.size() < static_cast<size_t>(options.batch_cells)) break;
  }
  if (options.max_added_id) {
    std::vector<SqlParam> params{bound};
    params.insert(params.end(), expired_params.begin(), expired_params.end());
    CELLAR_ASSIGN_OR_RETURN(auto rows, conn.Query("SELECT COUNT(*) FROM " + qualified_table +
                                                      " WHERE added_id > ? AND (" + expired + ")",
                                                  params));
    stats->held_back = rows.empty() ? 0 : rows[0].Uint(0);
  }
  return Status::Ok();
}

}  // namespace cellar::internal
