// The pipeline's database work in plain SQL: what the SQL alone allows.
//
// Per `batch` writes of random shards of a host, the statements the stages
// send for them, as batched as they get and with no Cellar code in between:
//   - the put: one autocommit multi-row INSERT (the raw baseline's statement);
//   - the index worker: one transaction of the pointer placeholders (INSERT
//     ... ON DUPLICATE KEY UPDATE ... RETURNING, which locks each row's
//     pointer), the entries, the pointers and the applied positions;
//   - per kRelayPageRows writes, the relay: one transaction that locks its
//     checkpoint row, reads a page of the host log and writes the checkpoint.
// Only the puts' rows count, so the rate is writes/s.
#include <algorithm>
#include <set>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_pipeline.h"
#include "cells/mysql_client.h"
#include "indexes/index_catalog.h"

namespace cellar::bench::pipeline {
namespace {

constexpr int kRelayPageRows = 1000;  // relay.batch_cells of the benchmark's cluster
constexpr size_t kCellParams = 7;     // per row of a raw cells INSERT (bench_put_raw.cc)

// One field value of `type`, as the worker would extract it from a trip.
SqlParam FieldValue(IndexFieldType type, std::mt19937_64& rng) {
  switch (type) {
    case IndexFieldType::kUuid:
      return Uuid::Random().ToBytes();
    case IndexFieldType::kString:
      return std::string(rng() % 20 < 17 ? "completed" : "rider_canceled");
    case IndexFieldType::kInt:
    case IndexFieldType::kDatetime:
      return static_cast<int64_t>(NowMicros() - static_cast<int64_t>(rng() % 1'000'000'000));
    case IndexFieldType::kFloat:
      return static_cast<double>(rng() % 10'000) / 100.0;
    case IndexFieldType::kBool:
      return static_cast<int64_t>(rng() % 2);
  }
  return nullptr;
}

std::string Placeholders(size_t rows, const std::string& row) {
  std::string out;
  for (size_t i = 0; i < rows; ++i) out += (i ? ", " : "") + row;
  return out;
}

struct CellRef {
  uint64_t shard;
  std::string row_key;
};

// The index worker's transaction for the cells of one put statement.
RawTransaction IndexTransaction(const std::string& db, const IndexDefinition& index, int version,
                                const std::string& datastore, const std::string& column,
                                const std::vector<CellRef>& cells,
                                const std::vector<uint32_t>& host_shards, uint64_t* added_id,
                                std::mt19937_64& rng) {
  const std::vector<IndexField> fields = index.AllFields();
  const std::string entries = QualifiedTable(db, EntryTableName(index.table, version));
  const std::string pointers = QualifiedTable(db, PointerTableName(index.table, version));
  RawTransaction tx;

  RawStatement lock{.sql = "INSERT INTO " + pointers +
                           " (shard, row_key, column_key, ref_key, target_shard) VALUES " +
                           Placeholders(cells.size(), "(?, ?, ?, -1, NULL)") +
                           " ON DUPLICATE KEY UPDATE ref_key = ref_key RETURNING shard, row_key, "
                           "column_key, ref_key, target_shard",
                    .params = {},
                    .returning = true,
                    .cell_rows = false};
  std::string columns = "shard, row_key, column_key, ref_key, added_id, source_shard, created_at";
  std::string update = "added_id = IF(VALUES(ref_key) > ref_key, VALUES(added_id), added_id)";
  std::string field_marks;
  for (const IndexField& f : fields) {
    columns += ", " + f.sql_column;
    field_marks += ", ?";
    update += ", " + f.sql_column + " = IF(VALUES(ref_key) > ref_key, VALUES(" + f.sql_column +
              "), " + f.sql_column + ")";
  }
  update += ", ref_key = GREATEST(ref_key, VALUES(ref_key))";
  RawStatement upsert{
      .sql = "INSERT INTO " + entries + " (" + columns + ") VALUES " +
             Placeholders(cells.size(), "(?, ?, ?, ?, ?, ?, ?" + field_marks + ")") +
             " ON DUPLICATE KEY UPDATE " + update,
      .params = {},
      .returning = false,
      .cell_rows = false};
  RawStatement point{.sql = "INSERT INTO " + pointers +
                            " (shard, row_key, column_key, ref_key, target_shard) VALUES " +
                            Placeholders(cells.size(), "(?, ?, ?, ?, ?)") +
                            " ON DUPLICATE KEY UPDATE ref_key = VALUES(ref_key), target_shard = "
                            "VALUES(target_shard)",
                     .params = {},
                     .returning = false,
                     .cell_rows = false};
  std::set<uint64_t> source_shards;
  const int64_t now = NowMicros();
  for (const CellRef& c : cells) {
    // The entry lives on the shard of its first field's value (a random
    // driver): on this host, as every write of this host's batch.
    const uint64_t target = host_shards[rng() % host_shards.size()];
    const uint64_t id = ++*added_id;
    lock.params.insert(lock.params.end(), {c.shard, c.row_key, column});
    upsert.params.insert(upsert.params.end(),
                         {target, c.row_key, column, int64_t{1}, id, c.shard, now});
    for (const IndexField& f : fields) upsert.params.push_back(FieldValue(f.type, rng));
    point.params.insert(point.params.end(), {c.shard, c.row_key, column, int64_t{1}, target});
    source_shards.insert(c.shard);
  }
  RawStatement positions{.sql = "INSERT INTO " + QualifiedTable(db, "index_positions") +
                                " (datastore, shard, applied_added_id) VALUES " +
                                Placeholders(source_shards.size(), "(?, ?, ?)") +
                                " ON DUPLICATE KEY UPDATE applied_added_id = "
                                "GREATEST(applied_added_id, VALUES(applied_added_id))",
                         .params = {},
                         .returning = false,
                         .cell_rows = false};
  for (uint64_t shard : source_shards)
    positions.params.insert(positions.params.end(), {datastore, shard, *added_id});
  tx.statements = {std::move(lock), std::move(upsert), std::move(point), std::move(positions)};
  return tx;
}

// The relay's transaction for one page of the host log after `after`.
RawTransaction RelayTransaction(const std::string& db, const std::string& datastore,
                                uint64_t after) {
  const std::string checkpoint = QualifiedTable(db, "relay_checkpoint");
  RawTransaction tx;
  tx.statements.push_back(
      {.sql = "SELECT owner_epoch FROM " + checkpoint + " WHERE datastore = ? FOR UPDATE",
       .params = {datastore},
       .returning = true,
       .cell_rows = false});
  tx.statements.push_back(
      {.sql = "SELECT row_key, column_name, ref_key, body, tombstone, created_at, added_id, "
              "shard FROM " +
              QualifiedTable(db, "cells_" + datastore) +
              " WHERE added_id > ? ORDER BY added_id LIMIT " + std::to_string(kRelayPageRows),
       .params = {after},
       .returning = true,
       .cell_rows = false});
  tx.statements.push_back(
      {.sql = "UPDATE " + checkpoint +
              " SET after_added_id = ?, kafka_offset = ?, kafka_partition = "
              "?, updated_at = ?, scan_offsets = ? WHERE datastore = ?",
       .params = {after + kRelayPageRows, int64_t{-1}, int64_t{-1},
                  static_cast<int64_t>(NowMicros()), std::string(""), datastore},
       .returning = false,
       .cell_rows = false});
  return tx;
}

}  // namespace

RawWork PlanPipelineSql(const ClusterConfig& cfg, const IndexDefinition& index, int version,
                        const std::string& column, int writes, int body_bytes,
                        std::mt19937_64& rng) {
  const std::string& datastore = index.datastore;
  RawWork puts =
      PlanRawStatements(cfg, datastore, column, writes, kSqlCeilingBatch, body_bytes, rng);
  RawWork work(puts.size());
  for (size_t h = 0; h < puts.size(); ++h) {
    const std::string db = cfg.HostDatabase(cfg.mysql.hosts[h]);
    std::vector<uint32_t> host_shards;
    for (uint32_t s = 0; s < cfg.shards; ++s)
      if (cfg.HostIndexForShard(s) == h) host_shards.push_back(s);
    uint64_t added_id = 0, page_after = 0;
    int since_page = 0;
    for (RawTransaction& put : puts[h]) {
      std::vector<CellRef> cells;
      for (const RawStatement& st : put.statements)
        for (size_t p = 0; p + kCellParams <= st.params.size(); p += kCellParams)
          cells.push_back(
              {std::get<uint64_t>(st.params[p]), std::get<std::string>(st.params[p + 1])});
      RawTransaction indexed = IndexTransaction(db, index, version, datastore, column, cells,
                                                host_shards, &added_id, rng);
      work[h].push_back(std::move(put));
      work[h].push_back(std::move(indexed));
      since_page += static_cast<int>(cells.size());
      if (since_page >= kRelayPageRows) {
        work[h].push_back(RelayTransaction(db, datastore, page_after));
        page_after += kRelayPageRows;
        since_page = 0;
      }
    }
  }
  return work;
}

}  // namespace cellar::bench::pipeline
