// YamlReader: typed, key-checked reads of a YAML document that collect every
// error with file, line and key path instead of stopping at the first one.
// Shared by the cluster config and the index/trigger definition loaders.
//
// Usage:
//   YamlReader r("cellar.yaml");
//   YAML::Node root = r.Parse(text);          // syntax errors are recorded too
//   r.CheckKeys(root, "", {"shards", "mysql"}); // unknown keys are errors
//   r.ReadUint(root, "shards", "shards", &cfg.shards);
//   if (!r.errors().empty()) ...
// Not thread-safe; one reader per document.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cellar {

class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  // Parses text; a syntax error is recorded and a null node returned.
  YAML::Node Parse(std::string_view text);

  // Records "<source>:<line>: <path>: <message>" at `node`'s position.
  void Error(const YAML::Node& node, std::string_view path, std::string_view message);

  // REQUIRES: node is a map (otherwise an error is recorded). Each key not in
  // `allowed` is recorded as "unknown key".
  bool CheckKeys(const YAML::Node& node, std::string_view path,
                 std::initializer_list<std::string_view> allowed);
  bool ExpectMap(const YAML::Node& node, std::string_view path);
  bool ExpectSequence(const YAML::Node& node, std::string_view path);

  // Each reads map[key] into *out when present and leaves *out (its default)
  // when absent; a present value of the wrong type is an error. Returns true
  // when the key was present and valid.
  bool ReadString(const YAML::Node& map, std::string_view key, std::string_view path,
                  std::string* out);
  bool ReadInt(const YAML::Node& map, std::string_view key, std::string_view path, int64_t min,
               int64_t max, int64_t* out);
  bool ReadBool(const YAML::Node& map, std::string_view key, std::string_view path, bool* out);
  bool ReadDurationMillis(const YAML::Node& map, std::string_view key, std::string_view path,
                          int64_t* out);
  // Records "missing required key" when absent.
  bool Require(const YAML::Node& map, std::string_view key, std::string_view path);

  const std::vector<std::string>& errors() const { return errors_; }
  // OK, or InvalidArgument with every error, one per line.
  Status ToStatus() const;
  const std::string& source() const { return source_; }

  static std::string Join(std::string_view path, std::string_view key);
  // A plain scalar's number text without the one leading '+' YAML 1.2 allows
  // ("+5" -> "5"), for ParseDecimalInteger/ParseDecimalDouble (base/number_text.h).
  static std::string_view WithoutPlusSign(std::string_view scalar);

 private:
  std::string source_;
  int last_line_ = 1;
  std::vector<std::string> errors_;
};

}  // namespace cellar
