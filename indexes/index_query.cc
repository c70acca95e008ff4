#include "indexes/index_query.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "cells/log_position.h"
#include "indexes/index_entry.h"

namespace cellar {
namespace {

const char* OpSql(IndexFilter::Op op) {
  switch (op) {
    case IndexFilter::Op::kEq:
      return " = ?";
    case IndexFilter::Op::kNe:
      return " <> ?";
    case IndexFilter::Op::kLt:
      return " < ?";
    case IndexFilter::Op::kLe:
      return " <= ?";
    case IndexFilter::Op::kGt:
      return " > ?";
    case IndexFilter::Op::kGe:
      return " >= ?";
    case IndexFilter::Op::kIn:
      return " IN ";
  }
  return " = ?";
}

std::string Trim(std::string s) {
  size_t a = s.find_first_not_of(" \t");
  size_t b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// -1/0/1 comparing two values of the same field.
int CompareParams(const SqlParam& a, const SqlParam& b) {
  if (a.index() != b.index()) return a.index() < b.index() ? -1 : 1;
  if (auto* x = std::get_if<int64_t>(&a)) {
    int64_t y = std::get<int64_t>(b);
    return *x < y ? -1 : (*x > y ? 1 : 0);
  }
  if (auto* x = std::get_if<double>(&a)) {
    double y = std::get<double>(b);
    return *x < y ? -1 : (*x > y ? 1 : 0);
  }
  if (auto* x = std::get_if<std::string>(&a)) {
    int c = x->compare(std::get<std::string>(b));
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return 0;
}

bool Holds(const IndexFilter& f, const SqlParam& v) {
  if (f.op == IndexFilter::Op::kIn) {
    for (const auto& x : f.values)
      if (CompareParams(v, x) == 0) return true;
    return false;
  }
  int c = CompareParams(v, f.values[0]);
  switch (f.op) {
    case IndexFilter::Op::kEq:
      return c == 0;
    case IndexFilter::Op::kNe:
      return c != 0;
    case IndexFilter::Op::kLt:
      return c < 0;
    case IndexFilter::Op::kLe:
      return c <= 0;
    case IndexFilter::Op::kGt:
      return c > 0;
    case IndexFilter::Op::kGe:
      return c >= 0;
    default:
      return false;
  }
}

std::string Hex(const std::string& s) {
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += k[c >> 4];
    out += k[c & 0xf];
  }
  return out;
}

bool Unhex(const std::string& s, std::string* out) {
  if (s.size() % 2) return false;
  auto v = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
  };
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = v(s[i]), lo = v(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

nlohmann::json ParamToJson(const SqlParam& p) {
  if (auto* i = std::get_if<int64_t>(&p)) return {{"i", *i}};
  if (auto* d = std::get_if<double>(&p)) return {{"d", *d}};
  if (auto* s = std::get_if<std::string>(&p)) return {{"s", Hex(*s)}};
  return nullptr;
}

bool JsonToParam(const nlohmann::json& j, SqlParam* out) {
  if (!j.is_object()) return false;
  if (j.contains("i") && j["i"].is_number_integer())
    *out = j["i"].get<int64_t>();
  else if (j.contains("d") && j["d"].is_number())
    *out = j["d"].get<double>();
  else if (j.contains("s") && j["s"].is_string()) {
    std::string raw;
    if (!Unhex(j["s"].get<std::string>(), &raw)) return false;
    *out = raw;
  } else
    return false;
  return true;
}

SqlParam StoredParam(const IndexFieldType t, const SqlRow& row, size_t i) {
  switch (t) {
    case IndexFieldType::kUuid:
    case IndexFieldType::kString:
      return row.Bytes(i);
    case IndexFieldType::kFloat:
      return row.Double(i);
    default:
      return row.Int(i);
  }
}

}  // namespace

Result<IndexFilter> ParseIndexFilter(const IndexDefinition& def, const std::string& text) {
  // field := [A-Za-z0-9_.]+ ; op := = != < <= > >= | in ; the rest is the value
  // (or the comma-separated list of `in`), each optionally in '...' or "...":
  // quoted text is data, whatever it contains (operators, " in ", commas).
  auto syntax = [&] {
    return InvalidArgument("filter '" + text +
                           "': expected 'field op value' with op one of = != < <= > >= in");
  };
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  const size_t field_start = i;
  while (i < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '.'))
    ++i;
  IndexFilter f;
  f.field = text.substr(field_start, i - field_start);
  if (f.field.empty()) return syntax();
  while (i < text.size() && is_space(text[i])) ++i;
  std::string rhs;
  if (i + 2 <= text.size() && (text[i] == 'i' || text[i] == 'I') &&
      (text[i + 1] == 'n' || text[i + 1] == 'N') &&
      (i + 2 == text.size() || is_space(text[i + 2]) || text[i + 2] == '(')) {
    f.op = IndexFilter::Op::kIn;
    rhs = Trim(text.substr(i + 2));
    if (rhs.size() >= 2 && rhs.front() == '(' && rhs.back() == ')')
      rhs = rhs.substr(1, rhs.size() - 2);
  } else {
    static const std::pair<const char*, IndexFilter::Op> kOps[] = {
        {"!=", IndexFilter::Op::kNe}, {"<=", IndexFilter::Op::kLe}, {">=", IndexFilter::Op::kGe},
        {"=", IndexFilter::Op::kEq},  {"<", IndexFilter::Op::kLt},  {">", IndexFilter::Op::kGt}};
    bool found = false;
    for (const auto& [tok, op] : kOps) {
      const std::string_view t(tok);
      if (text.compare(i, t.size(), t) == 0) {
        f.op = op;
        rhs = Trim(text.substr(i + t.size()));
        found = true;
        break;
      }
    }
    if (!found) return syntax();
  }
  const IndexField* field = def.FindField(f.field);
  if (!field) return InvalidArgument("index '" + def.table + "' has no field '" + f.field + "'");
  std::vector<std::string> parts;
  if (f.op == IndexFilter::Op::kIn) {
    std::string cur;
    char quote = 0;
    for (char ch : rhs) {
      if (quote) {
        if (ch == quote) quote = 0;
        cur += ch;
      } else if (ch == ',') {
        parts.push_back(Trim(cur));
        cur.clear();
      } else {
        if ((ch == '\'' || ch == '"') && Trim(cur).empty()) quote = ch;
        cur += ch;
      }
    }
    parts.push_back(Trim(cur));
    if (parts.size() == 1 && parts[0].empty())
      return InvalidArgument("filter '" + text + "': in needs at least one value");
  } else {
    parts.push_back(rhs);
  }
  for (auto& p : parts) {
    if (p.size() >= 2 && (p.front() == '\'' || p.front() == '"') && p.back() == p.front())
      p = p.substr(1, p.size() - 2);
    CELLAR_ASSIGN_OR_RETURN(SqlParam v, TextToFieldValue(*field, p));
    f.values.push_back(std::move(v));
  }
  return f;
}

const IndexDefinition* IndexReader::Find(const std::string& index) const {
  for (const auto& d : defs_)
    if (d.table == index) return &d;
  return nullptr;
}

Result<IndexDefinition> IndexReader::VersionDefinition(const IndexDefinition& current,
                                                       const IndexVersion& v) {
  if (v.fingerprint == current.Fingerprint()) return current;
  {
    MutexLock lock(&mu_);
    auto it = version_defs_.find({v.table, v.version});
    if (it != version_defs_.end()) return it->second;
  }
  CELLAR_ASSIGN_OR_RETURN(IndexDefinition d, catalog_.DefinitionOf(current, v));
  MutexLock lock(&mu_);
  version_defs_.emplace(std::make_pair(v.table, v.version), d);  // versions never change
  return d;
}

namespace {

// True when a failed read of a cached serving version may have failed because
// a newer version serves now: the cached one's tables were dropped after it
// was retired, or the query names a field only the newer one has (the query
// passed against the caller's definition already). Then the registry is read
// again and the query retried. Not for an unreachable host.
bool MayBeStaleVersion(const Status& s) {
  return s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kDeadlineExceeded;
}

}  // namespace

struct IndexReader::Resolved {
  std::vector<IndexField> all, out_fields;
  SqlParam shard_value;
  const IndexField* order_field = nullptr;  // into the definition resolved against
};

Result<IndexReader::Resolved> IndexReader::Resolve(const IndexQuery& q, const IndexDefinition& d,
                                                   const std::string& note) {
  Resolved r;
  r.all = d.AllFields();
  const IndexField& shard_field = r.all.front();
  if (q.shard_value.empty())
    return InvalidArgument("index '" + q.index + "' needs a value for its shard field '" +
                           shard_field.path + "'");
  auto value = TextToFieldValue(shard_field, q.shard_value);
  if (!value.ok())
    return InvalidArgument("shard_value '" + q.shard_value + "': " + value.status().message());
  r.shard_value = std::move(value).value();
  for (const auto& name : q.fields) {
    const IndexField* f = d.FindField(name);
    if (!f) return InvalidArgument("index '" + q.index + "' has no field '" + name + "'" + note);
    r.out_fields.push_back(*f);
  }
  if (r.out_fields.empty()) r.out_fields = r.all;
  if (!q.order_by.empty()) {
    r.order_field = d.FindField(q.order_by);
    if (!r.order_field)
      return InvalidArgument("cannot order by unknown field '" + q.order_by + "'" + note);
  }
  for (const auto& f : q.filters) {
    const IndexField* field = d.FindField(f.field);
    if (!field)
      return InvalidArgument("index '" + q.index + "' has no field '" + f.field + "'" + note);
    if (f.values.empty()) return InvalidArgument("filter on '" + f.field + "' has no value");
  }
  return r;
}

Result<IndexReader::ServingRead> IndexReader::ServingVersion(const std::string& index, bool fresh) {
  const auto now = std::chrono::steady_clock::now();
  if (!fresh && serving_cache_ms_ > 0) {
    MutexLock lock(&mu_);
    auto it = serving_.find(index);
    if (it != serving_.end() &&
        now - it->second.read_at < std::chrono::milliseconds(serving_cache_ms_))
      return ServingRead{it->second.version, true};
  }
  CELLAR_ASSIGN_OR_RETURN(IndexVersion version, catalog_.Serving(index));
  MutexLock lock(&mu_);
  serving_[index] = CachedServing{version, now};
  return ServingRead{std::move(version), false};
}

void IndexReader::ForgetServingVersion(const std::string& index) {
  MutexLock lock(&mu_);
  serving_.erase(index);
}

Result<IndexQueryResult> IndexReader::Query(const IndexQuery& q) {
  const IndexDefinition* current = Find(q.index);
  if (!current) return NotFound("unknown index '" + q.index + "'");
  if (q.limit < 1 || q.limit > 1000)
    return InvalidArgument("limit must be between 1 and 1000, got " + std::to_string(q.limit));
  // First against the caller's definition: a bad query fails without touching MySQL.
  CELLAR_ASSIGN_OR_RETURN(const Resolved resolved, Resolve(q, *current, ""));
  // Read your index writes: first wait until the worker has applied the put's
  // shard log up to its position (then its entry, or its removal, is in).
  std::optional<Clock::time_point> catch_up_by;
  if (!q.after.empty()) {
    const ClusterConfig& cfg = store_->config();
    const Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(cfg.limits.index_wait_ms);
    CELLAR_ASSIGN_OR_RETURN(LogPosition after,
                            DecodeLogPosition(cfg, current->datastore, q.after, [this](uint32_t s) {
                              return store_->DatabaseOfShard(s);
                            }));
    CELLAR_RETURN_IF_ERROR(
        positions_.Wait(current->datastore, after.shard, after.added_id, cfg.limits.index_wait_ms));
    // The entries are committed on their host's primary before the position
    // is: a replica read first catches up with that primary, in what is left.
    if (q.read == ReadPreference::kReplica) catch_up_by = deadline;
  }
  // A query that waited for a position reads the registry itself: a cached
  // serving version may have been retired since, and no longer be written.
  for (int attempt = 0;; ++attempt) {
    CELLAR_ASSIGN_OR_RETURN(ServingRead serving,
                            ServingVersion(q.index, /*fresh=*/attempt > 0 || !q.after.empty()));
    auto result = QueryVersion(q, *current, resolved, serving.version, catch_up_by);
    if (result.ok() || !serving.cached || !MayBeStaleVersion(result.status())) return result;
    ForgetServingVersion(q.index);
  }
}

Result<IndexQueryResult> IndexReader::QueryVersion(const IndexQuery& q,
                                                   const IndexDefinition& current,
                                                   const Resolved& resolved_current,
                                                   const IndexVersion& version,
                                                   std::optional<Clock::time_point> catch_up_by) {
  // Against the definition of the version that serves, which may be an older
  // one while a changed definition's version is being built.
  CELLAR_ASSIGN_OR_RETURN(const IndexDefinition vdef, VersionDefinition(current, version));
  const IndexDefinition* def = &vdef;
  const Resolved* resolved = &resolved_current;
  Resolved resolved_older;
  if (version.fingerprint != current.Fingerprint()) {
    CELLAR_ASSIGN_OR_RETURN(
        resolved_older,
        Resolve(q, vdef,
                " in version " + std::to_string(version.version) +
                    ", which serves until the current definition's version is built"));
    resolved = &resolved_older;
  }
  const std::vector<IndexField>& all = resolved->all;
  const std::vector<IndexField>& out_fields = resolved->out_fields;
  const SqlParam& shard_value = resolved->shard_value;
  const IndexField* order_field = resolved->order_field;
  const IndexField& shard_field = all.front();
  const std::string order_col = order_field ? order_field->sql_column : "created_at";
  const IndexFieldType order_type = order_field ? order_field->type : IndexFieldType::kInt;
  const ClusterConfig& cfg = store_->config();
  const uint32_t shard = ShardForFieldValue(shard_field, shard_value, cfg.shards);

  std::string sql = "SELECT row_key, column_key, ref_key, " + order_col;
  for (const auto& f : out_fields) sql += ", " + f.sql_column;
  // The host's table holds the entries of all its shards: the shard leads the
  // WHERE (and every key), so the scan stays inside the query's own shard.
  sql += " FROM " +
         QualifiedTable(store_->DatabaseOfShard(shard), EntryTableName(q.index, version.version)) +
         " WHERE shard = ? AND " + shard_field.sql_column + " = ?";
  std::vector<SqlParam> params{int64_t{shard}, shard_value};
  for (const auto& f : q.filters) {
    const IndexField* field = def->FindField(f.field);
    if (!field) return InvalidArgument("index '" + q.index + "' has no field '" + f.field + "'");
    if (f.values.empty()) return InvalidArgument("filter on '" + f.field + "' has no value");
    sql += " AND " + field->sql_column + OpSql(f.op);
    if (f.op == IndexFilter::Op::kIn) {
      sql += "(";
      for (size_t i = 0; i < f.values.size(); ++i) sql += i ? ", ?" : "?";
      sql += ")";
      for (const auto& v : f.values) params.push_back(v);
    } else {
      params.push_back(f.values[0]);
    }
  }
  if (order_field) sql += " AND " + order_col + " IS NOT NULL";
  const char* cmp = q.descending ? "<" : ">";
  if (!q.cursor.empty()) {
    std::string raw;
    nlohmann::json c;
    SqlParam after;
    if (!Unhex(q.cursor, &raw) || (c = nlohmann::json::parse(raw, nullptr, false)).is_discarded() ||
        !c.is_object() || !c.contains("v") || !JsonToParam(c["v"], &after) || !c.contains("r") ||
        !c["r"].is_string() || !c.contains("c") || !c["c"].is_string())
      return InvalidArgument("invalid cursor");
    std::string row;
    if (!Unhex(c["r"].get<std::string>(), &row)) return InvalidArgument("invalid cursor");
    sql += std::string(" AND (") + order_col + ", row_key, column_key) " + cmp + " (?, ?, ?)";
    params.push_back(after);
    params.push_back(row);
    params.push_back(c["c"].get<std::string>());
  }
  const char* dir = q.descending ? " DESC" : " ASC";
  sql += std::string(" ORDER BY ") + order_col + dir + ", row_key" + dir + ", column_key" + dir +
         " LIMIT " + std::to_string(q.limit + 1);

  std::optional<int64_t> catch_up_ms;
  if (catch_up_by)
    catch_up_ms = std::max<int64_t>(
        0,
        std::chrono::duration_cast<std::chrono::milliseconds>(*catch_up_by - Clock::now()).count());
  std::vector<SqlRow> rows;
  CELLAR_RETURN_IF_ERROR(
      store_->ReadShardHost(shard, q.read, catch_up_ms, [&](MysqlConnection& c) -> Status {
        CELLAR_ASSIGN_OR_RETURN(rows, c.Query(sql, params));
        return Status::Ok();
      }));

  IndexQueryResult result;
  result.version = version.version;
  const bool more = static_cast<int>(rows.size()) > q.limit;
  if (more) rows.erase(rows.begin() + q.limit, rows.end());
  for (const auto& r : rows) {
    IndexHit h;
    h.row_key = Uuid::FromBytes(r.Bytes(0));
    h.column_key = r.Bytes(1);
    h.ref_key = r.Int(2);
    h.fields = nlohmann::json::object();
    for (size_t i = 0; i < out_fields.size(); ++i)
      h.fields[out_fields[i].path] = StoredToJson(out_fields[i], r, 4 + i);
    result.hits.push_back(std::move(h));
  }
  if (more && !rows.empty()) {
    const SqlRow& last = rows.back();
    nlohmann::json c = {{"v", ParamToJson(StoredParam(order_type, last, 3))},
                        {"r", Hex(last.Bytes(0))},
                        {"c", last.Bytes(1)}};
    result.next_cursor = Hex(c.dump());
  }
  if (q.verify) {
    // The cells as the entries were read: from a replica too when asked, and
    // then one that holds the `after` put (CellStore's replica reads).
    ReadOptions cell_read;
    cell_read.preference = q.read;
    cell_read.after = q.after;
    std::vector<IndexHit> kept;
    for (auto& h : result.hits) {
      auto latest = store_->Latest(def->datastore, h.row_key, h.column_key, cell_read);
      bool keep = false;
      if (latest.ok()) {
        const IndexColumnDef* cd = def->FindColumnDef(h.column_key);
        auto e =
            cd ? ExtractEntry(*def, *cd, *latest, cfg.shards) : Result<IndexEntry>(NotFound(""));
        if (e.ok() && e->target_shard == shard) {
          keep = true;
          for (size_t i = 0; i < cd->fields.size(); ++i) {
            if (cd->fields[i].path == shard_field.path &&
                CompareParams(e->values[i], shard_value) != 0)
              keep = false;
            for (const auto& f : q.filters)
              if (f.field == cd->fields[i].path && !Holds(f, e->values[i])) keep = false;
          }
          if (keep) h.ref_key = latest->ref_key;
        }
      } else if (latest.status().code() != StatusCode::kNotFound) {
        return latest.status();
      }
      if (keep)
        kept.push_back(std::move(h));
      else
        ++result.dropped_by_verify;
    }
    result.hits = std::move(kept);
  }
  return result;
}

}  // namespace cellar
