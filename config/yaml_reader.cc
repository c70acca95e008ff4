#include "config/yaml_reader.h"

#include "base/number_text.h"
#include "base/time.h"

namespace cellar {

std::string_view YamlReader::WithoutPlusSign(std::string_view scalar) {
  return scalar.size() > 1 && scalar[0] == '+' && scalar[1] != '-' ? scalar.substr(1) : scalar;
}

std::string YamlReader::Join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return std::string(path) + "." + std::string(key);
}

YAML::Node YamlReader::Parse(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    errors_.push_back(source_ + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    return YAML::Node();
  }
}

void YamlReader::Error(const YAML::Node& node, std::string_view path, std::string_view message) {
  int line = last_line_;
  if (node.IsDefined() && node.Mark().line >= 0) line = node.Mark().line + 1;
  last_line_ = line;
  std::string e = source_ + ":" + std::to_string(line) + ": ";
  if (!path.empty()) e += std::string(path) + ": ";
  e += message;
  errors_.push_back(std::move(e));
}

bool YamlReader::ExpectMap(const YAML::Node& node, std::string_view path) {
  if (node.IsMap()) return true;
  Error(node, path, "expected a mapping");
  return false;
}

bool YamlReader::ExpectSequence(const YAML::Node& node, std::string_view path) {
  if (node.IsSequence()) return true;
  Error(node, path, "expected a list");
  return false;
}

bool YamlReader::CheckKeys(const YAML::Node& node, std::string_view path,
                           std::initializer_list<std::string_view> allowed) {
  if (!ExpectMap(node, path.empty() ? "(top level)" : path)) return false;
  bool ok = true;
  for (const auto& kv : node) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    bool known = false;
    for (auto a : allowed) known |= (a == key);
    if (!known) {
      std::string hint = "unknown key (allowed:";
      for (auto a : allowed) hint += " " + std::string(a);
      hint += ")";
      Error(kv.first, Join(path, key), hint);
      ok = false;
    }
  }
  return ok;
}

bool YamlReader::Require(const YAML::Node& map, std::string_view key, std::string_view path) {
  if (map.IsMap() && map[std::string(key)]) return true;
  Error(map, Join(path, key), "missing required key");
  return false;
}

bool YamlReader::ReadString(const YAML::Node& map, std::string_view key, std::string_view path,
                            std::string* out) {
  if (!map.IsMap()) return false;
  YAML::Node n = map[std::string(key)];
  if (!n) return false;
  if (!n.IsScalar()) {
    Error(n, Join(path, key), "expected a string");
    return false;
  }
  *out = n.Scalar();
  return true;
}

bool YamlReader::ReadInt(const YAML::Node& map, std::string_view key, std::string_view path,
                         int64_t min, int64_t max, int64_t* out) {
  if (!map.IsMap()) return false;
  YAML::Node n = map[std::string(key)];
  if (!n) return false;
  const std::string where = Join(path, key);
  if (!n.IsScalar()) {
    Error(n, where, "expected an integer");
    return false;
  }
  const std::string& s = n.Scalar();
  const std::optional<int64_t> parsed = ParseDecimalInteger<int64_t>(WithoutPlusSign(s));
  if (!parsed) {
    Error(n, where, "expected an integer, got '" + s + "'");
    return false;
  }
  const int64_t v = *parsed;
  if (v < min || v > max) {
    Error(n, where,
          "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + s);
    return false;
  }
  *out = v;
  return true;
}

bool YamlReader::ReadBool(const YAML::Node& map, std::string_view key, std::string_view path,
                          bool* out) {
  if (!map.IsMap()) return false;
  YAML::Node n = map[std::string(key)];
  if (!n) return false;
  const std::string& s = n.IsScalar() ? n.Scalar() : "";
  if (s == "true" || s == "yes") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "no") {
    *out = false;
    return true;
  }
  Error(n, Join(path, key), "expected true or false");
  return false;
}

bool YamlReader::ReadDurationMillis(const YAML::Node& map, std::string_view key,
                                    std::string_view path, int64_t* out) {
  if (!map.IsMap()) return false;
  YAML::Node n = map[std::string(key)];
  if (!n) return false;
  auto parsed = ParseDurationMillis(n.IsScalar() ? n.Scalar() : "");
  if (!parsed.ok()) {
    Error(n, Join(path, key), "expected a duration like 30d");
    return false;
  }
  *out = *parsed;
  return true;
}

Status YamlReader::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  std::string all;
  for (const auto& e : errors_) {
    if (!all.empty()) all += "\n";
    all += e;
  }
  return InvalidArgument(all);
}

}  // namespace cellar
