#include "config/cluster_config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/yaml_reader.h"

namespace cellar {
namespace {

bool IsLowerOrDigitOrUnderscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// "0-31" or "7" -> [first, last]. 64-bit so that a huge shard number is
// reported as out of range instead of wrapping around to a valid one.
bool ParseShardRange(const std::string& s, uint64_t* first, uint64_t* last) {
  auto dash = s.find('-');
  try {
    size_t used = 0;
    if (dash == std::string::npos) {
      unsigned long v = std::stoul(s, &used);
      if (used != s.size()) return false;
      *first = *last = v;
      return true;
    }
    std::string a = s.substr(0, dash), b = s.substr(dash + 1);
    unsigned long va = std::stoul(a, &used);
    if (used != a.size() || a.empty() || a[0] == '-' || a[0] == '+') return false;
    unsigned long vb = std::stoul(b, &used);
    if (used != b.size() || b.empty() || b[0] == '-' || b[0] == '+') return false;
    if (va > vb) return false;
    *first = va;
    *last = vb;
    return true;
  } catch (...) {
    return false;
  }
}

void ReadIntInto(YamlReader& r, const YAML::Node& n, std::string_view key, std::string_view path,
                 int64_t min, int64_t max, int* out) {
  int64_t v = *out;
  if (r.ReadInt(n, key, path, min, max, &v)) *out = static_cast<int>(v);
}

// Reads a `tls` block at `path` into *out (which starts as no TLS). Every
// named file must be readable; relative paths resolve against `base_dir`.
void LoadTls(YamlReader& r, const YAML::Node& n, const std::string& path,
             const std::string& base_dir, MysqlTlsConfig* out) {
  *out = MysqlTlsConfig();
  if (!r.CheckKeys(n, path, {"mode", "ca", "cert", "key"}) && !n.IsMap()) return;
  out->mode = MysqlTlsMode::kVerifyIdentity;
  std::string mode;
  if (r.ReadString(n, "mode", path, &mode)) {
    if (mode == "disabled") {
      out->mode = MysqlTlsMode::kDisabled;
    } else if (mode == "required") {
      out->mode = MysqlTlsMode::kRequired;
    } else if (mode == "verify_ca") {
      out->mode = MysqlTlsMode::kVerifyCa;
    } else if (mode == "verify_identity") {
      out->mode = MysqlTlsMode::kVerifyIdentity;
    } else {
      r.Error(n["mode"], path + ".mode",
              "expected disabled, required, verify_ca or verify_identity, got '" + mode + "'");
    }
  }
  for (auto [key, file] : {std::pair<const char*, std::string*>{"ca", &out->ca},
                           {"cert", &out->cert},
                           {"key", &out->key}}) {
    if (!r.ReadString(n, key, path, file)) continue;
    if (file->empty()) {
      r.Error(n[key], path + "." + key, "must name a file");
      continue;
    }
    if ((*file)[0] != '/' && !base_dir.empty()) *file = base_dir + "/" + *file;
    if (!std::ifstream(*file).good())
      r.Error(n[key], path + "." + key, "cannot read the file '" + *file + "'");
  }
  if ((out->mode == MysqlTlsMode::kVerifyCa || out->mode == MysqlTlsMode::kVerifyIdentity) &&
      !n["ca"])
    r.Error(n, path + ".ca",
            std::string("mode ") + MysqlTlsModeName(out->mode) +
                " needs the CA certificate file that signed the server's certificate");
  if (n["cert"] && !n["key"]) r.Error(n, path + ".key", "cert needs its key");
  if (n["key"] && !n["cert"]) r.Error(n, path + ".cert", "key needs its cert");
}

// kafka.properties: a map of librdkafka property name -> scalar value. Values
// are passed as text (YAML true/1000 become "true"/"1000"); librdkafka itself
// checks names and values when a client is built.
void LoadKafkaProperties(YamlReader& r, const YAML::Node& n, KafkaConfig* kafka) {
  if (!r.ExpectMap(n, "kafka.properties")) return;
  for (const auto& kv : n) {
    const std::string name = kv.first.Scalar();
    const std::string path = "kafka.properties." + name;
    if (name.empty() || !kv.first.IsScalar()) {
      r.Error(kv.first, "kafka.properties", "expected librdkafka property names as keys");
      continue;
    }
    if (std::string why; IsCellarOwnedKafkaProperty(name, &why)) {
      r.Error(kv.first, path, "is set by Cellar and cannot be configured: " + why);
      continue;
    }
    if (!kv.second.IsScalar() || kv.second.IsNull()) {
      r.Error(kv.second, path, "expected a scalar value (string, number or boolean)");
      continue;
    }
    kafka->properties[name] = kv.second.Scalar();
    kafka->property_origins[name] = r.source() + ":" + std::to_string(kv.first.Mark().line + 1);
  }
}

// Reads hosts[i].replicas and .replication into *host. Every server must be
// unique across the cluster (`earlier` hosts and *host's own).
void LoadReplicas(YamlReader& r, const YAML::Node& h, const std::string& hp,
                  const std::vector<MysqlHostConfig>& earlier, MysqlHostConfig* host) {
  std::string mode;
  if (r.ReadString(h, "replication", hp, &mode)) {
    if (mode == "semi_sync")
      host->replication = ReplicationMode::kSemiSync;
    else if (mode == "async")
      host->replication = ReplicationMode::kAsync;
    else
      r.Error(h["replication"], hp + ".replication",
              "expected semi_sync or async, got '" + mode + "'");
  }
  // Two hosts may share a server (their databases differ) only while neither
  // replicates: a server's replication and read_only belong to one host.
  const bool replicated = h["replicas"] && h["replicas"].IsSequence() && h["replicas"].size() > 0;
  auto taken_by = [&](const MysqlServerConfig& s, bool as_replica) -> std::string {
    for (const auto& other : earlier)
      for (const auto& o : other.Servers())
        if (o == s && (as_replica || replicated || !other.replicas.empty()))
          return "host " + other.name + "'s";
    if (as_replica)
      for (const auto& o : host->Servers())
        if (o == s) return "this host's";
    return "";
  };
  if (std::string other = taken_by(MysqlServerConfig{host->address, host->port}, false);
      !other.empty())
    r.Error(h["port"] ? h["port"] : h, hp,
            "server " + host->address + ":" + std::to_string(host->port) + " is already " + other +
                ": hosts with replicas cannot share a server");
  if (!h["replicas"]) return;
  const YAML::Node list = h["replicas"];
  if (!r.ExpectSequence(list, hp + ".replicas")) return;
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string rp = hp + ".replicas[" + std::to_string(j) + "]";
    if (!r.CheckKeys(list[j], rp, {"address", "port"}) && !list[j].IsMap()) continue;
    MysqlServerConfig server;
    r.Require(list[j], "address", rp);
    r.ReadString(list[j], "address", rp, &server.address);
    if (!r.Require(list[j], "port", rp)) continue;
    ReadIntInto(r, list[j], "port", rp, 1, 65535, &server.port);
    if (std::string other = taken_by(server, true); !other.empty()) {
      r.Error(list[j], rp, "server " + server.Label() + " is already " + other);
      continue;
    }
    host->replicas.push_back(server);
  }
}

void LoadMysql(YamlReader& r, const YAML::Node& n, uint32_t shards, const std::string& base_dir,
               MysqlConfig* m) {
  const std::string p = "mysql";
  if (!r.CheckKeys(n, p,
                   {"user", "password_env", "database_prefix", "connect_timeout_ms",
                    "io_timeout_ms", "pool_size_per_host", "pool_idle_timeout", "tls",
                    "topology_refresh", "hold_writes", "hosts"}))
    if (!n.IsMap()) return;
  if (n["tls"]) LoadTls(r, n["tls"], "mysql.tls", base_dir, &m->tls);
  r.ReadString(n, "user", p, &m->user);
  r.ReadString(n, "password_env", p, &m->password_env);
  if (r.ReadString(n, "database_prefix", p, &m->database_prefix) &&
      !IsValidDatastoreName(m->database_prefix))
    r.Error(n["database_prefix"], "mysql.database_prefix",
            "must match [a-z][a-z0-9_]{0,47}, got '" + m->database_prefix + "'");
  ReadIntInto(r, n, "connect_timeout_ms", p, 1, 600000, &m->connect_timeout_ms);
  ReadIntInto(r, n, "io_timeout_ms", p, 1, 3600000, &m->io_timeout_ms);
  ReadIntInto(r, n, "pool_size_per_host", p, 1, 1024, &m->pool_size_per_host);
  if (r.ReadDurationMillis(n, "pool_idle_timeout", p, &m->pool_idle_timeout_ms) &&
      (m->pool_idle_timeout_ms < 0 || m->pool_idle_timeout_ms > 86400000))
    r.Error(n["pool_idle_timeout"], "mysql.pool_idle_timeout",
            "must be between 0s and 24h, got " + std::to_string(m->pool_idle_timeout_ms) + "ms");
  if (r.ReadDurationMillis(n, "topology_refresh", p, &m->topology_refresh_ms) &&
      (m->topology_refresh_ms < 10 || m->topology_refresh_ms > 60000))
    r.Error(n["topology_refresh"], "mysql.topology_refresh",
            "must be between 10ms and 60s, got " + std::to_string(m->topology_refresh_ms) + "ms");
  if (r.ReadDurationMillis(n, "hold_writes", p, &m->hold_writes_ms) &&
      (m->hold_writes_ms < 0 || m->hold_writes_ms > 600000))
    r.Error(n["hold_writes"], "mysql.hold_writes",
            "must be between 0s and 600s, got " + std::to_string(m->hold_writes_ms) + "ms");
  if (!r.Require(n, "hosts", p)) return;
  const YAML::Node hosts = n["hosts"];
  if (!r.ExpectSequence(hosts, "mysql.hosts")) return;
  std::vector<int> owner(shards, -1);
  for (size_t i = 0; i < hosts.size(); ++i) {
    const YAML::Node h = hosts[i];
    const std::string hp = "mysql.hosts[" + std::to_string(i) + "]";
    if (!r.CheckKeys(h, hp,
                     {"name", "address", "port", "replicas", "replication", "shards", "tls"}) &&
        !h.IsMap())
      continue;
    MysqlHostConfig host;
    host.tls = m->tls;
    if (h["tls"]) LoadTls(r, h["tls"], hp + ".tls", base_dir, &host.tls);
    host.name = "db" + std::to_string(i + 1);
    if (r.ReadString(h, "name", hp, &host.name)) {
      if (!IsValidHostName(host.name))
        r.Error(h["name"], hp + ".name", "must match [A-Za-z0-9_-]{1,32}, got '" + host.name + "'");
      else if (m->database_prefix.size() + 1 + host.name.size() > 64)
        r.Error(h["name"], hp + ".name",
                "database name '" + m->database_prefix + "_" + host.name +
                    "' (database_prefix + '_' + name) is over MariaDB's 64 characters");
      for (const auto& other : m->hosts)
        if (other.name == host.name)
          r.Error(h["name"], hp + ".name", "duplicate host name '" + host.name + "'");
    }
    r.ReadString(h, "address", hp, &host.address);
    ReadIntInto(r, h, "port", hp, 1, 65535, &host.port);
    LoadReplicas(r, h, hp, m->hosts, &host);
    std::string list;
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    if (r.Require(h, "shards", hp) && r.ReadString(h, "shards", hp, &list)) {
      bool parsed = true;
      size_t start = 0;
      while (parsed) {
        const size_t comma = list.find(',', start);
        std::string part = list.substr(start, comma == std::string::npos ? comma : comma - start);
        while (!part.empty() && part.front() == ' ') part.erase(0, 1);
        while (!part.empty() && part.back() == ' ') part.pop_back();
        uint64_t first = 0, last = 0;
        parsed = ParseShardRange(part, &first, &last);
        if (parsed) ranges.emplace_back(first, last);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      if (!parsed) {
        r.Error(h["shards"], hp + ".shards",
                "expected shard ranges like 0-31 or 0-30,32, got '" + list + "'");
      } else {
        for (const auto& [first, last] : ranges) {
          if (last >= shards) {
            r.Error(h["shards"], hp + ".shards",
                    "shard " + std::to_string(last) + " is out of range: the cluster has " +
                        std::to_string(shards) + " shards (0-" + std::to_string(shards - 1) + ")");
            continue;
          }
          // Report the first overlapping shard once, but still mark the rest of
          // the range owned so that it is not also reported as unowned.
          bool overlap_reported = false;
          for (uint64_t s = first; s <= last; ++s) {
            if (owner[s] >= 0) {
              if (!overlap_reported)
                r.Error(h["shards"], hp + ".shards",
                        "shard " + std::to_string(s) + " is already owned by mysql.hosts[" +
                            std::to_string(owner[s]) + "]");
              overlap_reported = true;
              continue;
            }
            owner[s] = static_cast<int>(i);
            host.shards.push_back(static_cast<uint32_t>(s));
          }
        }
        std::sort(host.shards.begin(), host.shards.end());
      }
    }
    m->hosts.push_back(host);
  }
  // Report unowned shards as ranges, once.
  std::string missing;
  for (uint32_t s = 0; s < shards;) {
    if (owner[s] >= 0) {
      ++s;
      continue;
    }
    uint32_t e = s;
    while (e + 1 < shards && owner[e + 1] < 0) ++e;
    if (!missing.empty()) missing += ", ";
    missing += e == s ? std::to_string(s) : std::to_string(s) + "-" + std::to_string(e);
    s = e + 1;
  }
  if (!missing.empty())
    r.Error(hosts, "mysql.hosts", "shards " + missing + " are owned by no host");
}

void LoadDatastores(YamlReader& r, const YAML::Node& n, std::vector<DatastoreConfig>* out) {
  if (!r.ExpectSequence(n, "datastores")) return;
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node d = n[i];
    const std::string dp = "datastores[" + std::to_string(i) + "]";
    if (!r.CheckKeys(d, dp, {"name", "ttl", "columns"}) && !d.IsMap()) continue;
    DatastoreConfig ds;
    if (r.Require(d, "name", dp) && r.ReadString(d, "name", dp, &ds.name)) {
      if (!IsValidDatastoreName(ds.name))
        r.Error(d["name"], dp + ".name", "must match [a-z][a-z0-9_]{0,47}, got '" + ds.name + "'");
      for (const auto& other : *out)
        if (other.name == ds.name)
          r.Error(d["name"], dp + ".name", "duplicate datastore '" + ds.name + "'");
    }
    r.ReadDurationMillis(d, "ttl", dp, &ds.ttl_ms);
    if (r.Require(d, "columns", dp)) {
      const YAML::Node cols = d["columns"];
      if (r.ExpectMap(cols, dp + ".columns")) {
        for (const auto& kv : cols) {
          ColumnConfig c;
          c.name = kv.first.IsScalar() ? kv.first.Scalar() : "";
          const std::string cp = dp + ".columns." + c.name;
          if (!IsValidColumnName(c.name))
            r.Error(kv.first, cp, "column name must match [A-Za-z][A-Za-z0-9_]{0,63}");
          // yaml-cpp keeps both entries of a repeated key.
          if (ds.FindColumn(c.name) != nullptr) {
            r.Error(kv.first, cp, "duplicate column '" + c.name + "'");
            continue;
          }
          const YAML::Node opts = kv.second;
          bool own_ttl = false;
          if (!opts.IsNull()) {
            if (r.CheckKeys(opts, cp, {"ttl"}) || opts.IsMap())
              own_ttl = r.ReadDurationMillis(opts, "ttl", cp, &c.ttl_ms);
          }
          if (!own_ttl) c.ttl_ms = ds.ttl_ms;  // the datastore's default
          ds.columns.push_back(c);
        }
        if (ds.columns.empty())
          r.Error(cols, dp + ".columns", "a datastore needs at least one column");
      }
    }
    out->push_back(std::move(ds));
  }
}

}  // namespace

const char* MysqlTlsModeName(MysqlTlsMode mode) {
  switch (mode) {
    case MysqlTlsMode::kDisabled:
      return "disabled";
    case MysqlTlsMode::kRequired:
      return "required";
    case MysqlTlsMode::kVerifyCa:
      return "verify_ca";
    case MysqlTlsMode::kVerifyIdentity:
      return "verify_identity";
  }
  return "disabled";
}

bool IsValidDatastoreName(std::string_view name) {
  if (name.empty() || name.size() > 48 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (char c : name)
    if (!IsLowerOrDigitOrUnderscore(c)) return false;
  return true;
}

bool IsValidHostName(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

bool IsValidColumnName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!alpha(name[0])) return false;
  for (char c : name)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '_') return false;
  return true;
}

const ColumnConfig* DatastoreConfig::FindColumn(std::string_view column) const {
  for (const auto& c : columns)
    if (c.name == column) return &c;
  return nullptr;
}

const DatastoreConfig* ClusterConfig::FindDatastore(std::string_view name) const {
  for (const auto& d : datastores)
    if (d.name == name) return &d;
  return nullptr;
}

const MysqlHostConfig& ClusterConfig::HostForShard(uint32_t shard) const {
  for (const auto& h : mysql.hosts)
    if (h.Owns(shard)) return h;
  return mysql.hosts.front();
}

std::string MysqlServerConfig::Label() const { return address + ":" + std::to_string(port); }

const char* ReplicationModeName(ReplicationMode mode) {
  return mode == ReplicationMode::kAsync ? "async" : "semi_sync";
}

std::vector<MysqlServerConfig> MysqlHostConfig::Servers() const {
  std::vector<MysqlServerConfig> out{MysqlServerConfig{address, port}};
  out.insert(out.end(), replicas.begin(), replicas.end());
  return out;
}

std::optional<MysqlServerConfig> MysqlHostConfig::FindServer(std::string_view label) const {
  for (const MysqlServerConfig& s : Servers())
    if (s.Label() == label) return s;
  return std::nullopt;
}

bool MysqlHostConfig::Owns(uint32_t shard) const {
  return std::binary_search(shards.begin(), shards.end(), shard);
}

std::string MysqlHostConfig::ShardList() const {
  std::string out;
  for (size_t i = 0; i < shards.size();) {
    size_t j = i;
    while (j + 1 < shards.size() && shards[j + 1] == shards[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(shards[i]);
    if (j > i) out += "-" + std::to_string(shards[j]);
    i = j + 1;
  }
  return out;
}

std::string ClusterConfig::HostDatabase(const MysqlHostConfig& host) const {
  return mysql.database_prefix + "_" + host.name;
}

std::string ClusterConfig::DatabaseForShard(uint32_t shard) const {
  return HostDatabase(HostForShard(shard));
}

size_t ClusterConfig::HostIndexForShard(uint32_t shard) const {
  for (size_t i = 0; i < mysql.hosts.size(); ++i)
    if (mysql.hosts[i].Owns(shard)) return i;
  return 0;
}

std::string ClusterConfig::LegacyShardDatabase(uint32_t shard) const {
  return mysql.database_prefix + "_s" + std::to_string(shard);
}

std::string ClusterConfig::MysqlPassword() const {
  if (mysql.password_env.empty()) return "";
  const char* v = std::getenv(mysql.password_env.c_str());
  return v ? v : "";
}

bool IsCellarOwnedKafkaProperty(std::string_view name, std::string* why) {
  struct Owned {
    std::string_view name, why;
  };
  static constexpr Owned kOwned[] = {
      {"bootstrap.servers", "use kafka.brokers"},
      {"metadata.broker.list", "use kafka.brokers"},
      {"group.id", "each trigger, index and reader has its own consumer group"},
      {"group.instance.id", "Cellar's consumers are dynamic group members"},
      {"enable.auto.commit", "Cellar commits offsets only for finished work"},
      {"enable.auto.offset.store", "Cellar commits offsets only for finished work"},
      {"auto.offset.reset", "each consumer's start is part of its contract"},
      {"enable.partition.eof", "Cellar's readers depend on it"},
      {"isolation.level", "Cellar's readers depend on it"},
      {"enable.idempotence", "the relay's ordering and exactly-once publishing need it"},
      {"transactional.id", "the relay's exactly-once publishing owns it"},
      {"acks", "the relay needs acks=all"},
      {"request.required.acks", "the relay needs acks=all"},
      {"message.timeout.ms", "the exactly-once relay's batches wait for it to expire"},
      {"delivery.timeout.ms", "the exactly-once relay's batches wait for it to expire"},
      {"log.queue", "librdkafka's logs go to Cellar's log"},
  };
  for (const Owned& o : kOwned)
    if (o.name == name) {
      if (why) *why = std::string(o.why);
      return true;
    }
  return false;
}

Result<ClusterConfig> ParseClusterConfig(std::string_view yaml_text,
                                         const std::string& source_name) {
  YamlReader r(source_name);
  ClusterConfig cfg;
  cfg.source = source_name;
  YAML::Node root = r.Parse(yaml_text);
  if (!r.errors().empty()) return r.ToStatus();
  r.CheckKeys(
      root, "",
      {"shards", "mysql", "limits", "group_commit", "kafka", "relay", "purge", "datastores"});
  if (!root.IsMap()) return r.ToStatus();
  int64_t shards = cfg.shards;
  r.ReadInt(root, "shards", "", 1, 65536, &shards);
  cfg.shards = static_cast<uint32_t>(shards);

  // TLS files named relative to the config resolve against its directory.
  const std::string base_dir = std::filesystem::path(source_name).parent_path().string();
  if (r.Require(root, "mysql", "")) LoadMysql(r, root["mysql"], cfg.shards, base_dir, &cfg.mysql);

  if (YAML::Node n = root["limits"]) {
    r.CheckKeys(n, "limits", {"max_body_bytes", "max_batch_cells", "max_log_limit", "index_wait"});
    r.ReadInt(n, "max_body_bytes", "limits", 2, int64_t{1} << 30, &cfg.limits.max_body_bytes);
    ReadIntInto(r, n, "max_batch_cells", "limits", 1, 100000, &cfg.limits.max_batch_cells);
    ReadIntInto(r, n, "max_log_limit", "limits", 1, 1000000, &cfg.limits.max_log_limit);
    r.ReadDurationMillis(n, "index_wait", "limits", &cfg.limits.index_wait_ms);
  }
  if (YAML::Node n = root["group_commit"]) {
    r.CheckKeys(n, "group_commit",
                {"max_batch_cells", "writer_threads_per_host", "min_pipelined_cells", "linger_us",
                 "commit_interval_us"});
    ReadIntInto(r, n, "max_batch_cells", "group_commit", 1, 10000,
                &cfg.group_commit.max_batch_cells);
    ReadIntInto(r, n, "writer_threads_per_host", "group_commit", 1, 256,
                &cfg.group_commit.writer_threads_per_host);
    ReadIntInto(r, n, "min_pipelined_cells", "group_commit", 0, 10000,
                &cfg.group_commit.min_pipelined_cells);
    ReadIntInto(r, n, "linger_us", "group_commit", 0, 100000, &cfg.group_commit.linger_us);
    ReadIntInto(r, n, "commit_interval_us", "group_commit", 0, 100000,
                &cfg.group_commit.commit_interval_us);
  }
  if (YAML::Node n = root["kafka"]) {
    r.CheckKeys(n, "kafka",
                {"brokers", "topic_prefix", "partitions", "max_event_body_bytes", "properties"});
    r.ReadString(n, "brokers", "kafka", &cfg.kafka.brokers);
    if (r.ReadString(n, "topic_prefix", "kafka", &cfg.kafka.topic_prefix)) {
      bool ok = !cfg.kafka.topic_prefix.empty() && cfg.kafka.topic_prefix.size() <= 100;
      for (char c : cfg.kafka.topic_prefix)
        ok &= IsLowerOrDigitOrUnderscore(c) || c == '-' || c == '.' || (c >= 'A' && c <= 'Z');
      if (!ok) r.Error(n["topic_prefix"], "kafka.topic_prefix", "must be 1-100 of [A-Za-z0-9._-]");
    }
    ReadIntInto(r, n, "partitions", "kafka", 1, 10000, &cfg.kafka.partitions);
    r.ReadInt(n, "max_event_body_bytes", "kafka", 0, int64_t{1} << 30,
              &cfg.kafka.max_event_body_bytes);
    if (YAML::Node props = n["properties"]) LoadKafkaProperties(r, props, &cfg.kafka);
  }
  if (YAML::Node n = root["relay"]) {
    r.CheckKeys(n, "relay",
                {"batch_cells", "poll_min_ms", "poll_max_ms", "target_batch_cells", "lock_retry_ms",
                 "exactly_once"});
    r.ReadBool(n, "exactly_once", "relay", &cfg.relay.exactly_once);
    ReadIntInto(r, n, "batch_cells", "relay", 1, 100000, &cfg.relay.batch_cells);
    ReadIntInto(r, n, "poll_min_ms", "relay", 1, 60000, &cfg.relay.poll_min_ms);
    ReadIntInto(r, n, "poll_max_ms", "relay", 1, 60000, &cfg.relay.poll_max_ms);
    ReadIntInto(r, n, "target_batch_cells", "relay", 0, 100000, &cfg.relay.target_batch_cells);
    ReadIntInto(r, n, "lock_retry_ms", "relay", 10, 600000, &cfg.relay.lock_retry_ms);
    // The idle back-off starts at poll_min_ms and grows to poll_max_ms.
    if ((n["poll_min_ms"] || n["poll_max_ms"]) && cfg.relay.poll_max_ms < cfg.relay.poll_min_ms)
      r.Error(n["poll_max_ms"] ? n["poll_max_ms"] : n["poll_min_ms"], "relay.poll_max_ms",
              "must be at least relay.poll_min_ms (" + std::to_string(cfg.relay.poll_min_ms) +
                  "), got " + std::to_string(cfg.relay.poll_max_ms));
  }
  if (YAML::Node n = root["purge"]) {
    if (r.CheckKeys(n, "purge", {"interval"}) || n.IsMap())
      r.ReadDurationMillis(n, "interval", "purge", &cfg.purge.interval_ms);
  }
  if (r.Require(root, "datastores", "")) LoadDatastores(r, root["datastores"], &cfg.datastores);
  if (!r.errors().empty()) return r.ToStatus();
  return cfg;
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseClusterConfig(ss.str(), path);
}

}  // namespace cellar
