#include "indexes/index_writer.h"

#include <optional>

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "indexes/index_catalog.h"
#include "indexes/index_entry.h"

namespace cellar {

Result<IndexApplyResult> IndexWriter::Apply(const IndexDefinition& def, int version,
                                            const Cell& cell) {
  CELLAR_ASSIGN_OR_RETURN(auto outcomes,
                          ApplyBatch(def.datastore, {IndexVersionRef{&def, version}}, {&cell},
                                     /*record_positions=*/false));
  return outcomes[0][0];
}

Result<bool> IndexWriter::RemoveEntryOf(const std::string& table, int version, const Uuid& row,
                                        const std::string& column, int64_t ref_key) {
  const ClusterConfig& cfg = store_->config();
  const uint32_t src = ShardForRow(row, cfg.shards);
  const std::string pointer =
      QualifiedTable(store_->DatabaseOfShard(src), PointerTableName(table, version));
  const std::string row_bytes = row.ToBytes();
  MysqlHostPool& src_pool = store_->PoolForShard(src);
  CELLAR_ASSIGN_OR_RETURN(auto lease, src_pool.Acquire());
  MysqlConnection& c = *lease;
  CELLAR_RETURN_IF_ERROR(c.Begin());
  auto fail = [&](Status s) -> Result<bool> {
    c.Rollback();
    return s;
  };
  auto ptr = c.Query("SELECT ref_key, target_shard FROM " + pointer +
                         " WHERE shard = ? AND row_key = ? AND column_key = ? FOR UPDATE",
                     {int64_t{src}, row_bytes, column});
  if (!ptr.ok()) return fail(ptr.status());
  if (ptr->empty() || (*ptr)[0].Int(0) != ref_key || (*ptr)[0].IsNull(1)) {
    c.Rollback();
    return false;  // never applied, a newer version applied, or no entry
  }
  const uint32_t target = static_cast<uint32_t>((*ptr)[0].Uint(1));
  // Same host: in the pointer's transaction; otherwise autocommitted first (a
  // crash before the pointer commits leaves a pointer to no entry, which the
  // next apply or removal handles).
  std::optional<MysqlHostPool::Lease> target_lease;
  MysqlConnection* tc = &c;
  if (&store_->PoolForShard(target) != &src_pool) {
    auto l = store_->PoolForShard(target).Acquire();
    if (!l.ok()) return fail(l.status());
    target_lease.emplace(std::move(l).value());
    tc = &**target_lease;
  }
  auto del = tc->Execute(
      "DELETE FROM " +
          QualifiedTable(store_->DatabaseOfShard(target), EntryTableName(table, version)) +
          " WHERE shard = ? AND row_key = ? AND column_key = ? AND ref_key = ?",
      {int64_t{target}, row_bytes, column, ref_key});
  if (!del.ok()) return fail(del.status());
  if (auto s = c.Execute("UPDATE " + pointer +
                             " SET target_shard = NULL"
                             " WHERE shard = ? AND row_key = ? AND column_key = ?",
                         {int64_t{src}, row_bytes, column});
      !s.ok())
    return fail(s.status());
  CELLAR_RETURN_IF_ERROR(c.Commit());
  return *del > 0;
}

}  // namespace cellar
