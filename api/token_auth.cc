#include "api/token_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config/cluster_config.h"
#include "config/yaml_reader.h"

namespace cellar {
namespace {

constexpr size_t kMinTokenLength = 16;

std::array<uint8_t, 32> Digest(std::string_view token) {
  std::array<uint8_t, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), d.data());
  return d;
}

std::string TrimTrailingSpace(std::string s) {
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Reads one entry's token from token_env or token_file; "" after recording an error.
std::string ReadToken(YamlReader& r, const YAML::Node& e, const std::string& path,
                      const std::string& base_dir,
                      const std::function<const char*(const char*)>& getenv_fn) {
  std::string env, file;
  const bool has_env = r.ReadString(e, "token_env", path, &env);
  const bool has_file = r.ReadString(e, "token_file", path, &file);
  if (has_env == has_file) {
    r.Error(e, path, "exactly one of token_env or token_file is required");
    return "";
  }
  std::string token;
  if (has_env) {
    const char* v = env.empty() ? nullptr : getenv_fn(env.c_str());
    if (v == nullptr || *v == '\0') {
      r.Error(e["token_env"], path + ".token_env",
              "environment variable '" + env + "' is not set or empty");
      return "";
    }
    token = v;
  } else {
    const std::string full = (!file.empty() && file[0] != '/') ? base_dir + "/" + file : file;
    if (file.empty() || !ReadWholeFile(full, &token)) {
      r.Error(e["token_file"], path + ".token_file", "cannot read token file '" + full + "'");
      return "";
    }
    token = TrimTrailingSpace(std::move(token));
  }
  if (token.size() < kMinTokenLength) {
    r.Error(e, path,
            "the token is " + std::to_string(token.size()) + " characters; at least " +
                std::to_string(kMinTokenLength) + " are required");
    return "";
  }
  return token;
}

// datastores: { trips: [read, write], "*": [read] } -> scope bits per name.
void ReadScopes(YamlReader& r, const YAML::Node& e, const std::string& path,
                std::map<std::string, uint8_t, std::less<>>* out) {
  if (!r.Require(e, "datastores", path)) return;
  const YAML::Node ds = e["datastores"];
  const std::string dp = path + ".datastores";
  if (!r.ExpectMap(ds, dp)) return;
  for (const auto& kv : ds) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const std::string np = dp + "." + name;
    if (name != "*" && !IsValidDatastoreName(name)) {
      r.Error(kv.first, np, "expected a datastore name or \"*\"");
      continue;
    }
    if (!kv.second.IsSequence() || kv.second.size() == 0) {
      r.Error(kv.second, np, "expected a non-empty list of scopes (read, write)");
      continue;
    }
    uint8_t bits = 0;
    for (const auto& s : kv.second) {
      const std::string v = s.IsScalar() ? s.Scalar() : "";
      if (v == "read") {
        bits |= static_cast<uint8_t>(AccessScope::kRead);
      } else if (v == "write") {
        bits |= static_cast<uint8_t>(AccessScope::kWrite);
      } else {
        r.Error(s, np, "unknown scope '" + v + "' (allowed: read write)");
      }
    }
    (*out)[name] |= bits;
  }
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

Result<TokenTable> TokenTable::Load(const std::string& path) {
  std::string text;
  if (!ReadWholeFile(path, &text)) return InvalidArgument("cannot read tokens file '" + path + "'");
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? "." : path.substr(0, slash);
  return Parse(text, path, base.empty() ? "/" : base);
}

Result<TokenTable> TokenTable::Parse(std::string_view yaml_text, const std::string& source_name,
                                     const std::string& base_dir,
                                     std::function<const char*(const char*)> getenv_fn) {
  if (!getenv_fn) getenv_fn = [](const char* name) { return std::getenv(name); };
  TokenTable table;
  YamlReader r(source_name);
  try {
    const YAML::Node root = r.Parse(yaml_text);
    if (r.errors().empty() && r.CheckKeys(root, "", {"tokens"}) && r.Require(root, "tokens", "")) {
      const YAML::Node list = root["tokens"];
      if (r.ExpectSequence(list, "tokens")) {
        for (size_t i = 0; i < list.size(); ++i) {
          const YAML::Node e = list[i];
          const std::string p = "tokens[" + std::to_string(i) + "]";
          if (!r.CheckKeys(e, p, {"name", "token_env", "token_file", "datastores"})) continue;
          Entry entry;
          if (r.Require(e, "name", p)) r.ReadString(e, "name", p, &entry.name);
          for (const Entry& other : table.entries_)
            if (!entry.name.empty() && other.name == entry.name)
              r.Error(e["name"], p + ".name", "duplicate token name '" + entry.name + "'");
          const std::string token = ReadToken(r, e, p, base_dir, getenv_fn);
          if (!token.empty()) {
            entry.digest = Digest(token);
            for (const Entry& other : table.entries_)
              if (other.digest == entry.digest)
                r.Error(e, p, "the same token as entry '" + other.name + "'");
          }
          ReadScopes(r, e, p, &entry.scopes);
          table.entries_.push_back(std::move(entry));
        }
      }
    }
  } catch (const std::exception& ex) {  // yaml-cpp throws on some malformed trees
    r.Error(YAML::Node(), "", std::string("cannot read the file: ") + ex.what());
  }
  CELLAR_RETURN_IF_ERROR(r.ToStatus());
  return table;
}

AuthDecision TokenTable::Check(std::string_view authorization, std::string_view datastore,
                               AccessScope scope) const {
  AuthDecision d;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    d.outcome = AuthOutcome::kMissingToken;
    return d;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  const std::array<uint8_t, 32> digest = Digest(token);
  // Compare against every entry so timing does not tell which one matched.
  const Entry* match = nullptr;
  for (const Entry& e : entries_)
    if (CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0) match = &e;
  if (match == nullptr) {
    d.outcome = AuthOutcome::kUnknownToken;
    return d;
  }
  d.principal = match->name;
  uint8_t bits = 0;
  if (auto it = match->scopes.find(datastore); it != match->scopes.end()) bits |= it->second;
  if (auto it = match->scopes.find("*"); it != match->scopes.end()) bits |= it->second;
  d.outcome =
      (bits & static_cast<uint8_t>(scope)) ? AuthOutcome::kAllowed : AuthOutcome::kForbidden;
  return d;
}

}  // namespace cellar
