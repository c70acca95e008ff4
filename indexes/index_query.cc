#include "indexes/index_query.h"

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
  static const std::pair<const char*, IndexFilter::Op> kOps[] = {
      {"!=", IndexFilter::Op::kNe}, {"<=", IndexFilter::Op::kLe}, {">=", IndexFilter::Op::kGe},
      {"=", IndexFilter::Op::kEq},  {"<", IndexFilter::Op::kLt},  {">", IndexFilter::Op::kGt}};
  IndexFilter f;
  std::string rhs;
  size_t in_pos = text.find(" in ");
  if (in_pos == std::string::npos) in_pos = text.find(" IN ");
  if (in_pos != std::string::npos) {
    f.field = Trim(text.substr(0, in_pos));
    f.op = IndexFilter::Op::kIn;
    rhs = Trim(text.substr(in_pos + 4));
    if (rhs.size() >= 2 && rhs.front() == '(' && rhs.back() == ')')
      rhs = rhs.substr(1, rhs.size() - 2);
  } else {
    size_t best = std::string::npos;
    size_t len = 0;
    for (const auto& [tok, op] : kOps) {
      size_t p = text.find(tok);
      if (p != std::string::npos && (best == std::string::npos || p < best)) {
        best = p;
        len = std::string_view(tok).size();
        f.op = op;
      }
    }
    if (best == std::string::npos)
      return InvalidArgument("filter '" + text +
                             "': expected 'field op value' with op one of = != < <= > >= in");
    f.field = Trim(text.substr(0, best));
    rhs = Trim(text.substr(best + len));
  }
  const IndexField* field = def.FindField(f.field);
  if (!field) return InvalidArgument("index '" + def.table + "' has no field '" + f.field + "'");
  std::vector<std::string> parts;
  if (f.op == IndexFilter::Op::kIn) {
    size_t start = 0;
    while (true) {
      size_t comma = rhs.find(',', start);
      parts.push_back(
          Trim(rhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
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

Result<IndexQueryResult> IndexReader::Query(const IndexQuery& q) {
  const IndexDefinition* def = Find(q.index);
  if (!def) return NotFound("unknown index '" + q.index + "'");
  if (q.limit < 1 || q.limit > 1000)
    return InvalidArgument("limit must be between 1 and 1000, got " + std::to_string(q.limit));
  const auto all = def->AllFields();
  const IndexField& shard_field = all.front();
  if (q.shard_value.empty())
    return InvalidArgument("index '" + q.index + "' needs a value for its shard field '" +
                           shard_field.path + "'");
  CELLAR_ASSIGN_OR_RETURN(SqlParam shard_value, TextToFieldValue(shard_field, q.shard_value));
  std::vector<IndexField> out_fields;
  for (const auto& name : q.fields) {
    const IndexField* f = def->FindField(name);
    if (!f) return InvalidArgument("index '" + q.index + "' has no field '" + name + "'");
    out_fields.push_back(*f);
  }
  if (out_fields.empty()) out_fields = all;
  const IndexField* order_field = nullptr;
  if (!q.order_by.empty()) {
    order_field = def->FindField(q.order_by);
    if (!order_field) return InvalidArgument("cannot order by unknown field '" + q.order_by + "'");
  }
  const std::string order_col = order_field ? order_field->sql_column : "created_at";
  const IndexFieldType order_type = order_field ? order_field->type : IndexFieldType::kInt;

  CELLAR_ASSIGN_OR_RETURN(IndexVersion version, catalog_.Serving(q.index));
  const ClusterConfig& cfg = store_->config();
  const uint32_t shard = ShardForFieldValue(shard_field, shard_value, cfg.shards);

  std::string sql = "SELECT row_key, column_key, ref_key, " + order_col;
  for (const auto& f : out_fields) sql += ", " + f.sql_column;
  sql += " FROM " +
         QualifiedTable(cfg.ShardDatabase(shard), EntryTableName(q.index, version.version)) +
         " WHERE " + shard_field.sql_column + " = ?";
  std::vector<SqlParam> params{shard_value};
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

  auto lease = store_->PoolForShard(shard).Acquire();
  if (!lease.ok())
    return Unavailable("shard " + std::to_string(shard) + ": " + lease.status().message());
  CELLAR_ASSIGN_OR_RETURN(auto rows, (*lease)->Query(sql, params));

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
    std::vector<IndexHit> kept;
    for (auto& h : result.hits) {
      auto latest = store_->Latest(def->datastore, h.row_key, h.column_key);
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
