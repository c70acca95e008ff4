// CellStore's log reads (the relay's and the index worker's source) and purge.
#include "base/log.h"
#include "cells/cell_store.h"
#include "cells/internal/cell_store_impl.h"
#include "cells/internal/cells_purge.h"
#include "cells/internal/write_fence.h"

namespace cellar {

namespace {

// How long a log read waits for an open writer before returning what is
// final so far (write_fence.h).
constexpr int kFenceWaitSeconds = 1;

// The cells `sql` selects (kCellColumns) appended to `page`, with their
// bodies as `bodies` says.
Status ReadCells(MysqlConnection& c, const std::string& sql, const std::vector<SqlParam>& params,
                 LogBodies bodies, HostLogPage* page) {
  CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, params));
  page->cells.reserve(page->cells.size() + rows.size());
  const bool text = bodies == LogBodies::kJsonText;
  if (text) page->body_texts.reserve(page->body_texts.size() + rows.size());
  std::string body_text;
  for (const auto& r : rows) {
    CELLAR_ASSIGN_OR_RETURN(Cell cell, RowToCell(r, text ? &body_text : nullptr));
    page->cells.push_back(std::move(cell));
    if (text) page->body_texts.push_back(std::move(body_text));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Up to `limit` final cells of one log, in added_id order: `select` is
// "SELECT ... WHERE <key filter> AND added_id > ?" with `params` for the key
// filter. A cell is returned only once no smaller added_id of the log can
// still commit: a contiguous run of ids (`contiguous`: the whole host log, so
// no id is missing) is final at once; past a gap, the read waits for the
// writers that were open and reads again up to the highest id seen, which is
// then final (write_fence.h). A writer still open after the wait ends the
// page before the gap (held_by_open_writer).
Result<HostLogPage> ReadFinalLog(MysqlConnection& c, const std::string& database,
                                 const std::string& select, std::vector<SqlParam> params,
                                 uint64_t after, int limit, bool contiguous, LogBodies bodies) {
  HostLogPage page;
  page.next_after = after;
  params.emplace_back(after);
  CELLAR_RETURN_IF_ERROR(ReadCells(c, select + " ORDER BY added_id LIMIT " + std::to_string(limit),
                                   params, bodies, &page));
  if (page.cells.empty()) return page;
  size_t run = 0;
  while (contiguous && run < page.cells.size() && page.cells[run].added_id == after + run + 1)
    ++run;
  if (run == page.cells.size()) {
    page.next_after = page.cells.back().added_id;
    return page;
  }
  const uint64_t high = page.cells.back().added_id;
  const uint64_t final_before = run ? page.cells[run - 1].added_id : after;
  Status fenced = internal::WaitForOpenWriters(c, database, kFenceWaitSeconds);
  page.cells.resize(run);
  if (bodies == LogBodies::kJsonText) page.body_texts.resize(run);
  page.next_after = final_before;
  if (fenced.code() == StatusCode::kDeadlineExceeded) {
    page.held_by_open_writer = true;
    return page;
  }
  CELLAR_RETURN_IF_ERROR(fenced);
  params.back() = final_before;
  params.emplace_back(high);
  CELLAR_RETURN_IF_ERROR(ReadCells(c,
                                   select + " AND added_id <= ? ORDER BY added_id LIMIT " +
                                       std::to_string(limit - static_cast<int>(run)),
                                   params, bodies, &page));
  const bool full = static_cast<int>(page.cells.size()) == limit;
  page.next_after = full && !page.cells.empty() ? page.cells.back().added_id : high;
  return page;
}

}  // namespace

Result<ShardLogPage> CellStore::ShardLog(const std::string& datastore, uint32_t shard,
                                         uint64_t after_added_id, int limit) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (shard >= impl_->config.shards)
    return InvalidArgument("shard " + std::to_string(shard) + " out of range: the cluster has " +
                           std::to_string(impl_->config.shards) + " shards");
  if (limit < 1 || limit > impl_->config.limits.max_log_limit)
    return InvalidArgument("limit must be between 1 and " +
                           std::to_string(impl_->config.limits.max_log_limit) + ", got " +
                           std::to_string(limit));
  const std::string db = impl_->DatabaseOfShard(shard);
  const std::string select = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                             impl_->Table(shard, datastore) + " WHERE shard = ? AND added_id > ?";
  return impl_->WithShard<ShardLogPage>(shard, [&](MysqlConnection& c) -> Result<ShardLogPage> {
    // Other shards' cells interleave in the host log: no run is known final.
    CELLAR_ASSIGN_OR_RETURN(HostLogPage page,
                            ReadFinalLog(c, db, select, {uint64_t{shard}}, after_added_id, limit,
                                         /*contiguous=*/false, LogBodies::kDocument));
    return ShardLogPage{std::move(page.cells), page.next_after};
  });
}

Result<HostLogPage> CellStore::HostLog(const std::string& datastore, size_t host,
                                       uint64_t after_added_id, int limit, LogBodies bodies) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range: the cluster has " +
                           std::to_string(impl_->config.mysql.hosts.size()) + " hosts");
  if (limit < 1 || limit > impl_->config.limits.max_log_limit)
    return InvalidArgument("limit must be between 1 and " +
                           std::to_string(impl_->config.limits.max_log_limit) + ", got " +
                           std::to_string(limit));
  const std::string db = impl_->config.HostDatabase(impl_->config.mysql.hosts[host]);
  const std::string select = std::string("SELECT ") + internal::kCellColumns + " FROM " +
                             impl_->HostTable(host, datastore) + " WHERE added_id > ?";
  const std::string what = "host " + impl_->config.mysql.hosts[host].name;
  return impl_->WithHost<HostLogPage>(host, what, [&](MysqlConnection& c) -> Result<HostLogPage> {
    return ReadFinalLog(c, db, select, {}, after_added_id, limit, /*contiguous=*/true, bodies);
  });
}

Result<uint64_t> CellStore::ShardHead(const std::string& datastore, uint32_t shard) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (shard >= impl_->config.shards)
    return InvalidArgument("shard " + std::to_string(shard) + " out of range");
  const std::string sql =
      "SELECT MAX(added_id) FROM " + impl_->Table(shard, datastore) + " WHERE shard = ?";
  return impl_->WithShard<uint64_t>(shard, [&](MysqlConnection& c) -> Result<uint64_t> {
    CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, {uint64_t{shard}}));
    return rows.empty() ? 0 : rows[0].Uint(0);
  });
}

Result<uint64_t> CellStore::HostHead(const std::string& datastore, size_t host) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  const std::string sql = "SELECT MAX(added_id) FROM " + impl_->HostTable(host, datastore);
  return impl_->WithHost<uint64_t>(host, "host " + impl_->config.mysql.hosts[host].name,
                                   [&](MysqlConnection& c) -> Result<uint64_t> {
                                     CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql));
                                     return rows.empty() ? 0 : rows[0].Uint(0);
                                   });
}

Result<std::vector<Cell>> CellStore::HostLatestPage(const std::string& datastore, size_t host,
                                                    const std::string& after_row,
                                                    const std::string& after_column, int limit) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  if (limit < 1 || limit > 10000)
    return InvalidArgument("limit must be between 1 and 10000, got " + std::to_string(limit));
  const std::string table = impl_->HostTable(host, datastore);
  // The pairs come from the cell_address key (row_key, column_name,
  // ref_key) in order; the derived table's columns are renamed so that the
  // outer select's names are the cells'.
  const std::string sql =
      std::string("SELECT ") + internal::kCellColumns + " FROM " + table +
      " JOIN (SELECT row_key AS k_row, column_name AS k_column, MAX(ref_key) AS k_ref FROM " +
      table + " WHERE row_key > ? OR (row_key = ? AND column_name > ?)" +
      " GROUP BY row_key, column_name ORDER BY row_key, column_name LIMIT " +
      std::to_string(limit) +
      ") page ON row_key = page.k_row AND column_name = page.k_column AND ref_key = page.k_ref"
      " ORDER BY row_key, column_name";
  return impl_->WithHost<std::vector<Cell>>(
      host, "host " + impl_->config.mysql.hosts[host].name,
      [&](MysqlConnection& c) -> Result<std::vector<Cell>> {
        CELLAR_ASSIGN_OR_RETURN(auto rows, c.Query(sql, {after_row, after_row, after_column}));
        std::vector<Cell> out;
        out.reserve(rows.size());
        for (const auto& r : rows) {
          CELLAR_ASSIGN_OR_RETURN(Cell cell, RowToCell(r, nullptr));
          out.push_back(std::move(cell));
        }
        return out;
      });
}

Result<MicrosSinceEpoch> CellStore::HostLogCreatedAt(const std::string& datastore, size_t host,
                                                     uint64_t after_added_id) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host " + std::to_string(host) + " out of range");
  const std::string sql = "SELECT created_at FROM " + impl_->HostTable(host, datastore) +
                          " WHERE added_id > ? ORDER BY added_id LIMIT 1";
  return impl_->WithHost<MicrosSinceEpoch>(host, "host " + impl_->config.mysql.hosts[host].name,
                                           [&](MysqlConnection& c) -> Result<MicrosSinceEpoch> {
                                             CELLAR_ASSIGN_OR_RETURN(
                                                 auto rows, c.Query(sql, {after_added_id}));
                                             return rows.empty() ? 0 : rows[0].Int(0);
                                           });
}

Result<PurgeStats> CellStore::Purge(const std::string& datastore) {
  CELLAR_RETURN_IF_ERROR(ValidateDatastore(impl_->config, datastore).status());
  PurgeStats stats;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h) {
    auto r = PurgeHost(datastore, h, PurgeOptions{});
    if (r.ok()) {
      stats.deleted += r->deleted;
    } else {
      stats.shards_failed += static_cast<uint32_t>(impl_->config.mysql.hosts[h].shards.size());
      LogWarn("purge", "host failed",
              {{"host", impl_->config.mysql.hosts[h].name}, {"error", r.status().ToString()}});
    }
  }
  return stats;
}

Result<PurgeStats> CellStore::PurgeHost(const std::string& datastore, size_t host,
                                        const PurgeOptions& options) {
  CELLAR_ASSIGN_OR_RETURN(const DatastoreConfig* ds, ValidateDatastore(impl_->config, datastore));
  if (host >= impl_->config.mysql.hosts.size())
    return InvalidArgument("host index " + std::to_string(host) + " is out of range (" +
                           std::to_string(impl_->config.mysql.hosts.size()) + " hosts)");
  if (options.batch_cells < 1 || options.batch_cells > 100000)
    return InvalidArgument("batch_cells must be 1..100000, got " +
                           std::to_string(options.batch_cells));
  PurgeStats stats;
  const std::string table = impl_->HostTable(host, datastore);
  auto r = impl_->WithHost<bool>(
      host, "host " + impl_->config.mysql.hosts[host].name,
      [&](MysqlConnection& c) -> Result<bool> {
        CELLAR_RETURN_IF_ERROR(internal::PurgeCellsTable(c, table, *ds, options, &stats));
        return true;
      });
  if (!r.ok()) return r.status();
  return stats;
}

}  // namespace cellar
