#include "testing/test_cluster.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace cellar::testing {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "FATAL (test support): %s\n", message.c_str());
  std::abort();
}

std::string MakeTempDir(const std::string& label) {
  std::string safe;
  for (char c : label) safe += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cellar-" + safe + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) Die("mkdtemp " + pattern + ": " + strerror(errno));
  return pattern;
}

// Quotes a YAML scalar so that ':' ',' etc. stay literal.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string MakeClusterYaml(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                            const std::string& brokers, const std::string& database_prefix) {
  std::vector<std::vector<const PrivateMariaDb*>> hosts;
  for (const auto* db : dbs) hosts.push_back({db});
  return MakeReplicatedClusterYaml(hosts, shards, brokers, database_prefix);
}

std::string MakeReplicatedClusterYaml(const std::vector<std::vector<const PrivateMariaDb*>>& hosts,
                                      uint32_t shards, const std::string& brokers,
                                      const std::string& database_prefix,
                                      const std::string& mysql_extra) {
  if (hosts.empty()) Die("MakeClusterYaml: no databases");
  if (shards < hosts.size()) Die("MakeClusterYaml: fewer shards than databases");
  std::set<std::string> labels;
  for (const auto& h : hosts) {
    if (h.empty()) Die("MakeReplicatedClusterYaml: a host without servers");
    labels.insert(h[0]->label());
  }
  const bool use_labels = labels.size() == hosts.size();

  std::string y = "shards: " + std::to_string(shards) + "\n";
  y += "mysql:\n  user: root\n  database_prefix: " + database_prefix + "\n" + mysql_extra +
       "  hosts:\n";
  const uint64_t n = hosts.size();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t first = i * shards / n, last = (i + 1) * shards / n - 1;
    const PrivateMariaDb* primary = hosts[i][0];
    const std::string name = use_labels ? primary->label() : "db" + std::to_string(i + 1);
    std::string replicas;
    for (size_t r = 1; r < hosts[i].size(); ++r)
      replicas += std::string(replicas.empty() ? "" : ", ") + "{ address: " + hosts[i][r]->host() +
                  ", port: " + std::to_string(hosts[i][r]->port()) + " }";
    y += "    - { name: " + Quote(name) + ", address: " + primary->host() +
         ", port: " + std::to_string(primary->port()) + ", shards: \"" + std::to_string(first) +
         "-" + std::to_string(last) + "\"" +
         (replicas.empty() ? std::string() : ", replicas: [" + replicas + "]") + " }\n";
  }
  if (!brokers.empty()) y += "kafka:\n  brokers: " + Quote(brokers) + "\n";
  y += "datastores:\n"
       "  - name: trips\n"
       "    columns:\n"
       "      BASE: {}\n"
       "      STATUS: {}\n"
       "      EPHEMERAL: { ttl: 2s }\n"
       "  - name: users\n"
       "    columns:\n"
       "      PROFILE: {}\n";
  return y;
}

std::string MakeKafkaClusterYaml(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                                 const std::string& brokers, const std::string& prefix,
                                 int partitions) {
  if (brokers.empty() || partitions < 1) {
    std::fprintf(stderr, "MakeKafkaClusterYaml: brokers and partitions are required\n");
    std::abort();
  }
  std::string yaml = MakeClusterYaml(dbs, shards, brokers, prefix);
  // MakeClusterYaml writes "kafka:\n  brokers: ...\n": the settings go below it.
  const auto line_end = yaml.find('\n', yaml.find("brokers:", yaml.find("kafka:\n")));
  yaml.insert(line_end + 1,
              "  topic_prefix: " + prefix + "\n  partitions: " + std::to_string(partitions) + "\n");
  return yaml;
}

ClusterConfig MakeClusterConfig(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                                const std::string& brokers, const std::string& database_prefix) {
  const std::string yaml = MakeClusterYaml(dbs, shards, brokers, database_prefix);
  Result<ClusterConfig> cfg = ParseClusterConfig(yaml, "<test>");
  if (!cfg.ok())
    Die("MakeClusterConfig: invalid config:\n" + cfg.status().ToString() + "\n" + yaml);
  return std::move(cfg).value();
}

std::string WriteTempFile(const std::string& contents, const std::string& suffix) {
  // One directory per process, removed at normal exit by the static's destructor.
  static TempDir dir("files");
  static std::atomic<int> counter{0};
  const std::string path = dir.File("f" + std::to_string(++counter) + suffix);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) Die("WriteTempFile: cannot write " + path);
  return path;
}

TempDir::TempDir(const std::string& label) : path_(MakeTempDir(label)) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace cellar::testing
