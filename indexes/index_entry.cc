#include "indexes/index_entry.h"

#include <limits>
#include <optional>

#include "base/number_text.h"
#include "cells/shard_map.h"

namespace cellar {
namespace {

const nlohmann::json* FindPath(const nlohmann::json& body, const std::string& path) {
  const nlohmann::json* cur = &body;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    if (!cur->is_object()) return nullptr;
    auto it =
        cur->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::string ShortestDouble(double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

}  // namespace

Result<SqlParam> JsonToFieldValue(const IndexField& f, const nlohmann::json& v) {
  auto bad = [&](const char* what) {
    return InvalidArgument("field " + f.path + " is not " + what);
  };
  switch (f.type) {
    case IndexFieldType::kUuid: {
      if (!v.is_string()) return bad("a UUID string");
      auto u = Uuid::Parse(v.get<std::string>());
      if (!u.ok()) return bad("a UUID string");
      return SqlParam(u->ToBytes());
    }
    case IndexFieldType::kString: {
      if (!v.is_string()) return bad("a string");
      const auto& s = v.get_ref<const std::string&>();
      if (s.size() > 255) return InvalidArgument("field " + f.path + " is longer than 255 bytes");
      return SqlParam(s);
    }
    case IndexFieldType::kInt:
      // An unsigned beyond INT64_MAX would wrap to a negative BIGINT.
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return bad("an integer");
      if (v.is_number_integer()) return SqlParam(v.get<int64_t>());
      return bad("an integer");
    case IndexFieldType::kFloat:
      if (v.is_number()) return SqlParam(v.get<double>());
      return bad("a number");
    case IndexFieldType::kBool:
      if (v.is_boolean()) return SqlParam(int64_t{v.get<bool>() ? 1 : 0});
      return bad("a boolean");
    case IndexFieldType::kDatetime: {
      if (!v.is_string()) return bad("an RFC 3339 time");
      auto t = ParseRfc3339(v.get<std::string>());
      if (!t.ok()) return bad("an RFC 3339 time");
      return SqlParam(int64_t{*t});
    }
  }
  return bad("valid");
}

Result<SqlParam> TextToFieldValue(const IndexField& f, const std::string& text) {
  switch (f.type) {
    case IndexFieldType::kInt: {
      std::optional<int64_t> v = ParseDecimalInteger<int64_t>(text);
      if (!v) return InvalidArgument("field " + f.path + ": '" + text + "' is not an integer");
      return SqlParam(*v);
    }
    case IndexFieldType::kFloat: {
      // Decimal and finite: strtod also took nan, inf and hex.
      std::optional<double> v = ParseDecimalDouble(text);
      if (!v) return InvalidArgument("field " + f.path + ": '" + text + "' is not a number");
      return SqlParam(*v);
    }
    case IndexFieldType::kBool:
      if (text == "true") return SqlParam(int64_t{1});
      if (text == "false") return SqlParam(int64_t{0});
      return InvalidArgument("field " + f.path + ": '" + text + "' is not true or false");
    default:
      return JsonToFieldValue(f, nlohmann::json(text));
  }
}

nlohmann::json StoredToJson(const IndexField& f, const SqlRow& row, size_t i) {
  if (row.IsNull(i)) return nullptr;
  switch (f.type) {
    case IndexFieldType::kUuid:
      return Uuid::FromBytes(row.Bytes(i)).ToString();
    case IndexFieldType::kString:
      return row.Bytes(i);
    case IndexFieldType::kInt:
      return row.Int(i);
    case IndexFieldType::kFloat:
      return row.Double(i);
    case IndexFieldType::kBool:
      return row.Int(i) != 0;
    case IndexFieldType::kDatetime:
      return FormatRfc3339(row.Int(i));
  }
  return nullptr;
}

uint32_t ShardForFieldValue(const IndexField& f, const SqlParam& v, uint32_t shards) {
  std::string canonical;
  if (f.type == IndexFieldType::kUuid) {
    return ShardForRow(Uuid::FromBytes(std::get<std::string>(v)), shards);
  } else if (auto* s = std::get_if<std::string>(&v)) {
    canonical = *s;
  } else if (auto* i = std::get_if<int64_t>(&v)) {
    canonical = f.type == IndexFieldType::kBool ? (*i ? "true" : "false") : std::to_string(*i);
  } else if (auto* d = std::get_if<double>(&v)) {
    canonical = ShortestDouble(*d == 0 ? 0.0 : *d);  // -0 = 0 in SQL: one shard for both
  }
  return static_cast<uint32_t>(Fnv1a64(canonical) % shards);
}

Result<IndexEntry> ExtractEntry(const IndexDefinition& def, const IndexColumnDef& cd,
                                const Cell& cell, uint32_t shards) {
  IndexEntry e;
  e.row_key = cell.row_key;
  e.column_key = cell.column;
  e.ref_key = cell.ref_key;
  e.added_id = cell.added_id;
  e.source_shard = ShardForRow(cell.row_key, shards);
  for (const auto& f : cd.fields) {
    const nlohmann::json* v = FindPath(cell.body, f.path);
    if (!v) return InvalidArgument("missing field " + f.path);
    CELLAR_ASSIGN_OR_RETURN(SqlParam p, JsonToFieldValue(f, *v));
    if (f.path == def.shard_field) e.target_shard = ShardForFieldValue(f, p, shards);
    e.values.push_back(std::move(p));
  }
  return e;
}

}  // namespace cellar
