#include "indexes/index_definition.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/yaml_reader.h"

namespace cellar {
namespace {

bool IsIdentifierPart(const std::string& s) {
  if (s.empty() || s.size() > 40) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// "fare.total" -> "f_fare__total", or "" if a part is not an identifier.
std::string SqlColumnFor(const std::string& path) {
  std::string out = "f_";
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!IsIdentifierPart(part)) return "";
    out += part;
    if (dot == std::string::npos) break;
    out += "__";
    start = dot + 1;
  }
  return out.size() <= 64 ? out : "";
}

bool SameSqlColumn(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool ParseType(const std::string& s, IndexFieldType* t) {
  static const std::pair<const char*, IndexFieldType> kTypes[] = {
      {"UUID", IndexFieldType::kUuid},        {"uuid", IndexFieldType::kUuid},
      {"string", IndexFieldType::kString},    {"int", IndexFieldType::kInt},
      {"float", IndexFieldType::kFloat},      {"bool", IndexFieldType::kBool},
      {"datetime", IndexFieldType::kDatetime}};
  for (const auto& [name, type] : kTypes)
    if (s == name) {
      *t = type;
      return true;
    }
  return false;
}

void ParseOne(YamlReader& r, const YAML::Node& n, const std::string& p,
              const ClusterConfig& cluster, std::vector<IndexDefinition>* out) {
  if (!r.CheckKeys(n, p, {"table", "datastore", "shard_field", "column_defs"}) && !n.IsMap())
    return;
  IndexDefinition d;
  d.source = r.source();
  const std::string pp = p.empty() ? "" : p + ".";
  if (r.Require(n, "table", p) && r.ReadString(n, "table", p, &d.table)) {
    if (!IsValidDatastoreName(d.table) || d.table.size() > 40)
      r.Error(n["table"], pp + "table", "must match [a-z][a-z0-9_]{0,39}, got '" + d.table + "'");
    for (const auto& o : *out)
      if (o.table == d.table)
        r.Error(n["table"], pp + "table", "duplicate index '" + d.table + "'");
  }
  const DatastoreConfig* ds = nullptr;
  if (r.Require(n, "datastore", p) && r.ReadString(n, "datastore", p, &d.datastore)) {
    ds = cluster.FindDatastore(d.datastore);
    if (!ds) r.Error(n["datastore"], pp + "datastore", "unknown datastore '" + d.datastore + "'");
  }
  r.ReadString(n, "shard_field", p, &d.shard_field);
  if (r.Require(n, "column_defs", p) && r.ExpectSequence(n["column_defs"], pp + "column_defs")) {
    const YAML::Node defs = n["column_defs"];
    for (size_t i = 0; i < defs.size(); ++i) {
      const std::string cp = pp + "column_defs[" + std::to_string(i) + "]";
      const YAML::Node c = defs[i];
      if (!r.CheckKeys(c, cp, {"column_key", "fields"}) && !c.IsMap()) continue;
      IndexColumnDef cd;
      if (r.Require(c, "column_key", cp) && r.ReadString(c, "column_key", cp, &cd.column_key)) {
        if (ds && !ds->FindColumn(cd.column_key))
          r.Error(c["column_key"], cp + ".column_key",
                  "datastore '" + d.datastore + "' has no column '" + cd.column_key + "'");
        for (const auto& o : d.column_defs)
          if (o.column_key == cd.column_key)
            r.Error(c["column_key"], cp + ".column_key",
                    "duplicate column '" + cd.column_key + "'");
      }
      if (r.Require(c, "fields", cp) && r.ExpectSequence(c["fields"], cp + ".fields")) {
        const YAML::Node fields = c["fields"];
        for (size_t k = 0; k < fields.size(); ++k) {
          const std::string fp = cp + ".fields[" + std::to_string(k) + "]";
          const YAML::Node f = fields[k];
          if (!r.CheckKeys(f, fp, {"field", "type"}) && !f.IsMap()) continue;
          IndexField field;
          std::string type;
          if (r.Require(f, "field", fp) && r.ReadString(f, "field", fp, &field.path)) {
            field.sql_column = SqlColumnFor(field.path);
            if (field.sql_column.empty())
              r.Error(f["field"], fp + ".field",
                      "'" + field.path +
                          "' is not a safe identifier path (letters, digits, _ and dots)");
            for (const auto& o : cd.fields)
              if (o.path == field.path)
                r.Error(f["field"], fp + ".field", "duplicate field '" + field.path + "'");
            // Different paths must not share a SQL column: MySQL column names are
            // case-insensitive and '.' becomes "__" ("fare.total" vs "fare__total").
            if (!field.sql_column.empty()) {
              const IndexField* clash = nullptr;
              for (const auto& o : cd.fields)
                if (o.path != field.path && SameSqlColumn(o.sql_column, field.sql_column))
                  clash = &o;
              for (const auto& ocd : d.column_defs)
                for (const auto& o : ocd.fields)
                  if (o.path != field.path && SameSqlColumn(o.sql_column, field.sql_column))
                    clash = &o;
              if (clash)
                r.Error(f["field"], fp + ".field",
                        "'" + field.path + "' and '" + clash->path +
                            "' map to the same SQL column " + field.sql_column);
            }
          }
          if (r.Require(f, "type", fp) && r.ReadString(f, "type", fp, &type) &&
              !ParseType(type, &field.type))
            r.Error(
                f["type"], fp + ".type",
                "unknown type '" + type + "' (expected UUID, string, int, float, bool, datetime)");
          cd.fields.push_back(field);
        }
        if (cd.fields.empty()) r.Error(fields, cp + ".fields", "needs at least one field");
      }
      d.column_defs.push_back(std::move(cd));
    }
    if (d.column_defs.empty()) r.Error(defs, pp + "column_defs", "needs at least one column_def");
  }
  if (d.shard_field.empty() && !d.column_defs.empty() && !d.column_defs[0].fields.empty())
    d.shard_field = d.column_defs[0].fields[0].path;
  // The shard field must exist, with one type, in every column_def.
  std::optional<IndexFieldType> shard_type;
  for (size_t i = 0; i < d.column_defs.size(); ++i) {
    const IndexField* f = nullptr;
    for (const auto& x : d.column_defs[i].fields)
      if (x.path == d.shard_field) f = &x;
    if (!f) {
      // Point at the column_def itself (its line), not at the whole definition.
      const YAML::Node defs = n["column_defs"];
      r.Error(defs.IsSequence() && i < defs.size() ? defs[i] : n,
              pp + "column_defs[" + std::to_string(i) + "]",
              "does not contain the shard field '" + d.shard_field + "'");
    } else if (shard_type && *shard_type != f->type) {
      r.Error(n, pp + "shard_field", "'" + d.shard_field + "' has different types in column_defs");
    } else {
      shard_type = f->type;
    }
  }
  // A field path used by several column_defs must have one type (one SQL column).
  for (const auto& a : d.AllFields())
    for (const auto& cd : d.column_defs)
      for (const auto& f : cd.fields)
        if (f.path == a.path && f.type != a.type)
          r.Error(n, pp + "column_defs", "field '" + f.path + "' has different types");
  out->push_back(std::move(d));
}

}  // namespace

std::string_view IndexFieldTypeName(IndexFieldType t) {
  switch (t) {
    case IndexFieldType::kUuid:
      return "UUID";
    case IndexFieldType::kString:
      return "string";
    case IndexFieldType::kInt:
      return "int";
    case IndexFieldType::kFloat:
      return "float";
    case IndexFieldType::kBool:
      return "bool";
    case IndexFieldType::kDatetime:
      return "datetime";
  }
  return "string";
}

std::vector<IndexField> IndexDefinition::AllFields() const {
  std::vector<IndexField> out;
  for (const auto& cd : column_defs)
    for (const auto& f : cd.fields) {
      bool seen = false;
      for (const auto& o : out) seen |= o.path == f.path;
      if (!seen) out.push_back(f);
    }
  std::stable_partition(out.begin(), out.end(),
                        [&](const IndexField& f) { return f.path == shard_field; });
  return out;
}

const IndexField* IndexDefinition::FindField(const std::string& path) const {
  for (const auto& cd : column_defs)
    for (const auto& f : cd.fields)
      if (f.path == path) return &f;
  return nullptr;
}

const IndexColumnDef* IndexDefinition::FindColumnDef(const std::string& column) const {
  for (const auto& cd : column_defs)
    if (cd.column_key == column) return &cd;
  return nullptr;
}

std::string IndexDefinition::Fingerprint() const {
  nlohmann::json j = {{"table", table}, {"datastore", datastore}, {"shard_field", shard_field}};
  for (const auto& cd : column_defs) {
    nlohmann::json fields = nlohmann::json::array();
    for (const auto& f : cd.fields) fields.push_back({f.path, IndexFieldTypeName(f.type)});
    j["column_defs"].push_back({{"column_key", cd.column_key}, {"fields", fields}});
  }
  const std::string text = j.dump();
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 8; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

Result<std::vector<IndexDefinition>> ParseIndexDefinitions(std::string_view yaml,
                                                           const std::string& source,
                                                           const ClusterConfig& cluster) {
  YamlReader r(source);
  YAML::Node root = r.Parse(yaml);
  if (!r.errors().empty()) return r.ToStatus();
  std::vector<IndexDefinition> out;
  if (root.IsMap() && root["indexes"]) {
    r.CheckKeys(root, "", {"indexes"});
    const YAML::Node list = root["indexes"];
    if (r.ExpectSequence(list, "indexes"))
      for (size_t i = 0; i < list.size(); ++i)
        ParseOne(r, list[i], "indexes[" + std::to_string(i) + "]", cluster, &out);
  } else {
    ParseOne(r, root, "", cluster, &out);
  }
  if (!r.errors().empty()) return r.ToStatus();
  return out;
}

Result<std::vector<IndexDefinition>> LoadIndexDefinitions(const std::string& path,
                                                          const ClusterConfig& cluster) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> files;
  if (!fs::exists(path, ec))
    return NotFound("index definitions '" + path + "' do not exist (" +
                    (fs::path(path).is_absolute()
                         ? std::string("an absolute path")
                         : "relative to " + fs::current_path(ec).string()) +
                    ")");
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec)) {
      auto ext = e.path().extension().string();
      if (ext == ".yaml" || ext == ".yml") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::vector<IndexDefinition> all;
  std::string errors;
  for (const auto& f : files) {
    std::ifstream in(f);
    if (!in) return InvalidArgument(f + ": cannot open index definition file");
    std::stringstream ss;
    ss << in.rdbuf();
    auto defs = ParseIndexDefinitions(ss.str(), f, cluster);
    if (!defs.ok()) {
      errors += (errors.empty() ? "" : "\n") + defs.status().message();
      continue;
    }
    for (auto& d : *defs) {
      for (const auto& o : all)
        if (o.table == d.table)
          errors += (errors.empty() ? "" : "\n") + f + ": duplicate index '" + d.table +
                    "' (also in " + o.source + ")";
      all.push_back(std::move(d));
    }
  }
  if (!errors.empty()) return InvalidArgument(errors);
  return all;
}

}  // namespace cellar
