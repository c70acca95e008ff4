#include "indexes/index_catalog.h"

#include "base/log.h"
#include "cells/mysql_client.h"
#include "cells/shard_move.h"
#include "indexes/index_positions.h"

namespace cellar {
namespace {

std::string SqlType(IndexFieldType t) {
  switch (t) {
    case IndexFieldType::kUuid:
      return "BINARY(16)";
    case IndexFieldType::kString:
      // Bytes, compared and ordered as bytes (= code points for UTF-8). Not a
      // utf8mb4_bin VARCHAR: that collation is PAD SPACE, so 'done' = 'done '.
      return "VARBINARY(255)";
    case IndexFieldType::kInt:
      return "BIGINT";
    case IndexFieldType::kFloat:
      return "DOUBLE";
    case IndexFieldType::kBool:
      return "TINYINT";
    case IndexFieldType::kDatetime:
      return "BIGINT";
  }
  return "BLOB";
}

IndexState ParseState(const std::string& s) {
  if (s == "ready") return IndexState::kReady;
  if (s == "retired") return IndexState::kRetired;
  return IndexState::kBuilding;
}

}  // namespace

std::string_view IndexStateName(IndexState s) {
  switch (s) {
    case IndexState::kBuilding:
      return "building";
    case IndexState::kReady:
      return "ready";
    case IndexState::kRetired:
      return "retired";
  }
  return "building";
}

std::string EntryTableName(const std::string& table, int version) {
  return "idx_" + table + "_v" + std::to_string(version);
}
std::string PointerTableName(const std::string& table, int version) {
  return EntryTableName(table, version) + "_rows";
}

Status IndexCatalog::EnsureRegistry(MysqlConnection& conn) {
  return conn.ExecuteDdl("CREATE TABLE IF NOT EXISTS " +
                         QualifiedTable(store_->config().DatabaseForShard(0), "index_versions") +
                         " (table_name VARCHAR(64) CHARACTER SET ascii NOT NULL,"
                         " version INT NOT NULL, fingerprint CHAR(16) NOT NULL,"
                         " state VARCHAR(16) NOT NULL, definition TEXT NOT NULL,"
                         " created_at BIGINT NOT NULL, PRIMARY KEY (table_name, version))"
                         " ENGINE=InnoDB");
}

Result<std::vector<SqlRow>> IndexCatalog::ReadRegistry(MysqlConnection& conn,
                                                       const std::string& sql,
                                                       const std::vector<SqlParam>& params) {
  auto rows = conn.Query(sql, params);
  // No registry yet (nothing applied): no versions. Reads never run DDL: they
  // are on the query path.
  if (!rows.ok() && rows.status().code() == StatusCode::kInternal &&
      rows.status().message().find("index_versions") != std::string::npos &&
      rows.status().message().find("doesn't exist") != std::string::npos)
    return std::vector<SqlRow>{};
  return rows;
}

Result<std::vector<std::string>> IndexCatalog::Indexes() {
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows, ReadRegistry(*lease, "SELECT DISTINCT table_name FROM " +
                                          QualifiedTable(store_->config().DatabaseForShard(0),
                                                         "index_versions") +
                                          " ORDER BY table_name"));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.Bytes(0));
  return out;
}

Result<std::vector<IndexVersion>> IndexCatalog::Versions(const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      ReadRegistry(*lease,
                   "SELECT version, fingerprint, state, created_at FROM " +
                       QualifiedTable(store_->config().DatabaseForShard(0), "index_versions") +
                       " WHERE table_name = ? ORDER BY version",
                   {table}));
  std::vector<IndexVersion> out;
  for (const auto& r : rows)
    out.push_back(IndexVersion{table, static_cast<int>(r.Int(0)), r.Bytes(1),
                               ParseState(r.Bytes(2)), r.Int(3)});
  return out;
}

Result<IndexVersion> IndexCatalog::Serving(const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(auto versions, Versions(table));
  const IndexVersion* best = nullptr;
  for (const auto& v : versions)
    if (v.state == IndexState::kReady) best = &v;
  if (!best)
    for (const auto& v : versions)
      if (v.state == IndexState::kBuilding) best = &v;
  if (!best)
    return NotFound("index '" + table + "' has not been applied (run `cellar index apply`)");
  return *best;
}

Result<std::vector<IndexVersion>> IndexCatalog::Writable(const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(auto versions, Versions(table));
  std::vector<IndexVersion> out;
  for (const auto& v : versions)
    if (v.state != IndexState::kRetired) out.push_back(v);
  return out;
}

Result<std::vector<IndexedColumns>> IndexCatalog::WritableOver(const std::string& datastore) {
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      ReadRegistry(*lease,
                   "SELECT table_name, version, fingerprint, state, created_at, definition FROM " +
                       QualifiedTable(store_->config().DatabaseForShard(0), "index_versions") +
                       " WHERE state <> 'retired' ORDER BY table_name, version"));
  std::vector<IndexedColumns> out;
  for (const auto& r : rows) {
    IndexedColumns ic{IndexVersion{r.Bytes(0), static_cast<int>(r.Int(1)), r.Bytes(2),
                                   ParseState(r.Bytes(3)), r.Int(4)},
                      {}};
    const auto j = nlohmann::json::parse(r.Bytes(5), nullptr, false);
    const bool readable = j.is_object() && j.contains("datastore") && j["datastore"].is_string() &&
                          j.contains("column_defs") && j["column_defs"].is_array();
    if (!readable) {
      LogWarn("index", "registry row without a readable definition; not considered",
              {{"index", ic.version.table}, {"version", std::to_string(ic.version.version)}});
      continue;
    }
    if (j["datastore"].get<std::string>() != datastore) continue;
    for (const auto& c : j["column_defs"])
      if (c.is_object() && c.contains("column_key") && c["column_key"].is_string())
        ic.columns.push_back(c["column_key"].get<std::string>());
    out.push_back(std::move(ic));
  }
  return out;
}

Status IndexCatalog::CreateTables(const IndexDefinition& def, int version) {
  const auto fields = def.AllFields();
  const std::string shard_col = fields.front().sql_column;
  std::string cols, keys;
  for (const auto& f : fields) cols += ", " + f.sql_column + " " + SqlType(f.type) + " NULL";
  keys += ", KEY k_newest (shard, " + shard_col + ", created_at)";
  for (size_t i = 1; i < fields.size(); ++i)
    keys += ", KEY k_" + std::to_string(i) + " (shard, " + shard_col + ", " + fields[i].sql_column +
            ")";
  const ClusterConfig& cfg = store_->config();
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    const std::string db = cfg.HostDatabase(cfg.mysql.hosts[h]);
    CELLAR_ASSIGN_OR_RETURN(auto lease, store_->PoolForHost(h).Acquire());
    CELLAR_RETURN_IF_ERROR(lease->ExecuteDdl(
        "CREATE TABLE IF NOT EXISTS " + QualifiedTable(db, EntryTableName(def.table, version)) +
        " (shard INT UNSIGNED NOT NULL, row_key BINARY(16) NOT NULL,"
        " column_key VARCHAR(64) CHARACTER SET ascii NOT NULL,"
        " ref_key BIGINT NOT NULL, added_id BIGINT UNSIGNED NOT NULL,"
        " source_shard INT UNSIGNED NOT NULL, created_at BIGINT NOT NULL" +
        cols + ", PRIMARY KEY (shard, row_key, column_key)" + keys + ") ENGINE=InnoDB"));
    CELLAR_RETURN_IF_ERROR(lease->ExecuteDdl(
        "CREATE TABLE IF NOT EXISTS " + QualifiedTable(db, PointerTableName(def.table, version)) +
        " (shard INT UNSIGNED NOT NULL, row_key BINARY(16) NOT NULL,"
        " column_key VARCHAR(64) CHARACTER SET ascii NOT NULL,"
        " ref_key BIGINT NOT NULL, target_shard INT UNSIGNED NULL,"
        " PRIMARY KEY (shard, row_key, column_key)) ENGINE=InnoDB"));
    // A host that shards moved away from refuses their rows in new tables too.
    for (const std::string& t :
         {EntryTableName(def.table, version), PointerTableName(def.table, version)})
      CELLAR_RETURN_IF_ERROR(FenceNewShardTable(*lease, db, t));
    CELLAR_RETURN_IF_ERROR(lease->ExecuteDdl(
        "CREATE TABLE IF NOT EXISTS " + QualifiedTable(db, "index_backfill") +
        " (table_version VARCHAR(80) CHARACTER SET ascii NOT NULL, shard INT UNSIGNED NOT NULL,"
        " after_added_id BIGINT UNSIGNED NOT NULL DEFAULT 0,"
        " cells_done BIGINT UNSIGNED NOT NULL DEFAULT 0, finished TINYINT NOT NULL DEFAULT 0,"
        " PRIMARY KEY (table_version, shard)) ENGINE=InnoDB"));
    CELLAR_RETURN_IF_ERROR(EnsureIndexPositionsTable(*lease, db));
  }
  return Status::Ok();
}

Result<ApplyOutcome> IndexCatalog::Apply(const IndexDefinition& def) {
  // On a cluster still in the per-shard layout the host logs look empty: a new
  // version would start ready with nothing in it.
  if (Status layout = store_->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition)
    return layout;
  {
    CELLAR_ASSIGN_OR_RETURN(auto lease,
                            store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
    CELLAR_RETURN_IF_ERROR(EnsureRegistry(*lease));
  }
  CELLAR_ASSIGN_OR_RETURN(auto versions, Versions(def.table));
  const std::string fp = def.Fingerprint();
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->state == IndexState::kRetired) continue;
    if (it->fingerprint == fp) {
      CELLAR_RETURN_IF_ERROR(CreateTables(def, it->version));  // heal missing host tables
      return ApplyOutcome{*it, false};
    }
    break;
  }
  const int version = versions.empty() ? 1 : versions.back().version + 1;
  CELLAR_RETURN_IF_ERROR(CreateTables(def, version));
  // A first version over an empty datastore has nothing to backfill.
  bool empty = versions.empty();
  for (size_t h = 0; empty && h < store_->config().mysql.hosts.size(); ++h) {
    CELLAR_ASSIGN_OR_RETURN(uint64_t head, store_->HostHead(def.datastore, h));
    empty = head == 0;
  }
  IndexVersion v{def.table, version, fp, empty ? IndexState::kReady : IndexState::kBuilding,
                 NowMicros()};
  nlohmann::json definition = {{"table", def.table},
                               {"datastore", def.datastore},
                               {"shard_field", def.shard_field},
                               {"source", def.source},
                               {"column_defs", nlohmann::json::array()}};
  for (const auto& cd : def.column_defs) {
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& f : cd.fields)
      fields.push_back({{"field", f.path},
                        {"type", std::string(IndexFieldTypeName(f.type))},
                        {"sql_column", f.sql_column}});
    definition["column_defs"].push_back({{"column_key", cd.column_key}, {"fields", fields}});
  }
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  CELLAR_RETURN_IF_ERROR(
      lease
          ->Execute("INSERT IGNORE INTO " +
                        QualifiedTable(store_->config().DatabaseForShard(0), "index_versions") +
                        " (table_name, version, fingerprint, state, definition, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                    {def.table, int64_t{version}, fp, std::string(IndexStateName(v.state)),
                     definition.dump(), v.created_at})
          .status());
  return ApplyOutcome{v, true};
}

Status IndexCatalog::MarkReady(const std::string& table, int version) {
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  const std::string reg = QualifiedTable(store_->config().DatabaseForShard(0), "index_versions");
  CELLAR_RETURN_IF_ERROR(lease->Begin());
  auto a = lease->Execute("UPDATE " + reg +
                              " SET state = 'retired' WHERE table_name = ? AND version < ?"
                              " AND state <> 'retired'",
                          {table, int64_t{version}});
  auto b =
      lease->Execute("UPDATE " + reg + " SET state = 'ready' WHERE table_name = ? AND version = ?",
                     {table, int64_t{version}});
  if (!a.ok() || !b.ok()) {
    lease->Rollback();
    return !a.ok() ? a.status() : b.status();
  }
  return lease->Commit();
}

Result<IndexDefinition> IndexCatalog::DefinitionOf(const IndexDefinition& current,
                                                   const IndexVersion& v) {
  if (v.fingerprint == current.Fingerprint()) return current;
  CELLAR_ASSIGN_OR_RETURN(auto lease,
                          store_->PoolForHost(store_->config().HostIndexForShard(0)).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      ReadRegistry(*lease,
                   "SELECT definition FROM " +
                       QualifiedTable(store_->config().DatabaseForShard(0), "index_versions") +
                       " WHERE table_name = ? AND version = ?",
                   {v.table, int64_t{v.version}}));
  if (rows.empty())
    return NotFound("index '" + v.table + "' has no version " + std::to_string(v.version));
  const auto j = nlohmann::json::parse(rows[0].Bytes(0), nullptr, false);
  const auto bad = FailedPrecondition(
      "index '" + v.table + "' version " + std::to_string(v.version) +
      " was created from another definition that the registry does not hold; apply the "
      "current definition and backfill it");
  if (j.is_discarded() || !j.is_object() || !j.contains("column_defs") ||
      !j["column_defs"].is_array() || !j.value("shard_field", nlohmann::json()).is_string() ||
      !j.value("datastore", nlohmann::json()).is_string())
    return bad;
  IndexDefinition d;
  d.table = v.table;
  d.datastore = j["datastore"].get<std::string>();
  d.shard_field = j["shard_field"].get<std::string>();
  d.source =
      j.value("source", nlohmann::json("")).is_string() ? j["source"].get<std::string>() : "";
  for (const auto& c : j["column_defs"]) {
    if (!c.is_object() || !c.contains("column_key") || !c["column_key"].is_string() ||
        !c.contains("fields") || !c["fields"].is_array())
      return bad;
    IndexColumnDef cd;
    cd.column_key = c["column_key"].get<std::string>();
    for (const auto& f : c["fields"]) {
      if (!f.is_object() || !f.contains("field") || !f["field"].is_string() ||
          !f.contains("type") || !f["type"].is_string() || !f.contains("sql_column") ||
          !f["sql_column"].is_string())
        return bad;
      IndexField field;
      field.path = f["field"].get<std::string>();
      field.sql_column = f["sql_column"].get<std::string>();
      const std::string type = f["type"].get<std::string>();
      bool known = false;
      for (auto t : {IndexFieldType::kUuid, IndexFieldType::kString, IndexFieldType::kInt,
                     IndexFieldType::kFloat, IndexFieldType::kBool, IndexFieldType::kDatetime})
        if (IndexFieldTypeName(t) == type) {
          field.type = t;
          known = true;
        }
      if (!known) return bad;
      cd.fields.push_back(std::move(field));
    }
    d.column_defs.push_back(std::move(cd));
  }
  if (d.column_defs.empty() || d.Fingerprint() != v.fingerprint) return bad;
  return d;
}

}  // namespace cellar
