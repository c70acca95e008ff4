// Cluster config loading: a valid file loads every value; each bad case gives
// its precise "<file>:<line>: <key path>: <what>" message, and several errors
// are all collected in one InvalidArgument.
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"

namespace cellar {

namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

// 1-based line of the first line of `yaml` containing `needle`; fails the test when absent.
int LineOf(const std::string& yaml, const std::string& needle) {
  std::istringstream in(yaml);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  ADD_FAILURE() << "'" << needle << "' not in the test YAML:\n" << yaml;
  return -1;
}

// "cellar.yaml:<line of needle>: <rest>"
std::string At(const std::string& yaml, const std::string& needle, const std::string& rest) {
  return "cellar.yaml:" + std::to_string(LineOf(yaml, needle)) + ": " + rest;
}

// The error lines of a failed parse (empty and a test failure when it succeeded).
std::vector<std::string> Errors(const std::string& yaml) {
  Result<ClusterConfig> r = ParseClusterConfig(yaml, "cellar.yaml");
  if (r.ok()) {
    ADD_FAILURE() << "config was accepted:\n" << yaml;
    return {};
  }
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << r.status().ToString();
  std::vector<std::string> lines;
  std::istringstream in(r.status().message());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// A small valid cluster: two hosts over 64 shards and one datastore. `hosts`
// and `datastores` replace the respective sections when given.
std::string Yaml(const std::string& hosts = "", const std::string& datastores = "",
                 const std::string& extra = "") {
  std::string y =
      "shards: 64\n"
      "mysql:\n"
      "  user: root\n"
      "  hosts:\n";
  y += hosts.empty() ? "    - { name: db1, address: 127.0.0.1, port: 3306, shards: 0-31 }\n"
                       "    - { name: db2, address: 127.0.0.1, port: 3307, shards: 32-63 }\n"
                     : hosts;
  y += extra;
  y += "datastores:\n";
  y += datastores.empty() ? "  - name: trips\n"
                            "    columns:\n"
                            "      BASE: {}\n"
                            "      STATUS: { ttl: 30d }\n"
                          : datastores;
  return y;
}

TEST(ConfigTest, FullConfigLoadsEveryValue) {
  const std::string yaml =
      "shards: 16\n"
      "mysql:\n"
      "  user: cellar\n"
      "  password_env: CELLAR_CONFIG_TEST_PASSWORD\n"
      "  database_prefix: cx\n"
      "  connect_timeout_ms: 1500\n"
      "  io_timeout_ms: 5000\n"
      "  pool_size_per_host: 3\n"
      "  hosts:\n"
      "    - { name: alpha, address: 10.0.0.1, port: 3306, shards: 0-9 }\n"
      "    - name: beta\n"
      "      address: 10.0.0.2\n"
      "      port: 3307\n"
      "      shards: \"10-15\"\n"
      "limits: { max_body_bytes: 2048, max_batch_cells: 10, max_log_limit: 500, index_wait: 2s }\n"
      "group_commit: { max_batch_cells: 64, writer_threads_per_host: 2, min_pipelined_cells: 12 }\n"
      "kafka: { brokers: \"127.0.0.1:9092\", topic_prefix: cx.t, partitions: 4,"
      " max_event_body_bytes: 1000 }\n"
      "relay: { batch_cells: 10, poll_min_ms: 2, poll_max_ms: 20, lock_retry_ms: 100,"
      " exactly_once: false }\n"
      "datastores:\n"
      "  - name: trips\n"
      "    columns:\n"
      "      BASE: {}\n"
      "      STATUS: { ttl: 30d }\n"
      "      EPHEMERAL: { ttl: 500ms }\n"
      "  - name: users_2\n"
      "    columns:\n"
      "      PROFILE:\n";
  Result<ClusterConfig> r = ParseClusterConfig(yaml, "full.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ClusterConfig& c = *r;
  EXPECT_EQ("full.yaml", c.source);
  EXPECT_EQ(16u, c.shards);
  EXPECT_EQ("cellar", c.mysql.user);
  EXPECT_EQ("CELLAR_CONFIG_TEST_PASSWORD", c.mysql.password_env);
  EXPECT_EQ("cx", c.mysql.database_prefix);
  EXPECT_EQ(1500, c.mysql.connect_timeout_ms);
  EXPECT_EQ(5000, c.mysql.io_timeout_ms);
  EXPECT_EQ(3, c.mysql.pool_size_per_host);
  ASSERT_EQ(2u, c.mysql.hosts.size());
  EXPECT_EQ("alpha", c.mysql.hosts[0].name);
  EXPECT_EQ("10.0.0.1", c.mysql.hosts[0].address);
  EXPECT_EQ(3306, c.mysql.hosts[0].port);
  EXPECT_EQ(10u, c.mysql.hosts[0].shards.size());
  EXPECT_EQ("0-9", c.mysql.hosts[0].ShardList());
  EXPECT_EQ("beta", c.mysql.hosts[1].name);
  EXPECT_EQ("10.0.0.2", c.mysql.hosts[1].address);
  EXPECT_EQ(3307, c.mysql.hosts[1].port);
  EXPECT_EQ("10-15", c.mysql.hosts[1].ShardList());
  EXPECT_EQ(2048, c.limits.max_body_bytes);
  EXPECT_EQ(10, c.limits.max_batch_cells);
  EXPECT_EQ(500, c.limits.max_log_limit);
  EXPECT_EQ(2000, c.limits.index_wait_ms);
  EXPECT_EQ(64, c.group_commit.max_batch_cells);
  EXPECT_EQ(2, c.group_commit.writer_threads_per_host);
  EXPECT_EQ(12, c.group_commit.min_pipelined_cells);
  EXPECT_EQ("127.0.0.1:9092", c.kafka.brokers);
  EXPECT_EQ("cx.t", c.kafka.topic_prefix);
  EXPECT_EQ(4, c.kafka.partitions);
  EXPECT_EQ(1000, c.kafka.max_event_body_bytes);
  EXPECT_EQ(10, c.relay.batch_cells);
  EXPECT_EQ(2, c.relay.poll_min_ms);
  EXPECT_EQ(20, c.relay.poll_max_ms);
  EXPECT_EQ(100, c.relay.lock_retry_ms);
  EXPECT_FALSE(c.relay.exactly_once);
  ASSERT_EQ(2u, c.datastores.size());
  const DatastoreConfig* trips = c.FindDatastore("trips");
  ASSERT_NE(nullptr, trips);
  ASSERT_EQ(3u, trips->columns.size());
  EXPECT_EQ("BASE", trips->columns[0].name);
  EXPECT_EQ(0, trips->columns[0].ttl_ms);
  ASSERT_NE(nullptr, trips->FindColumn("STATUS"));
  EXPECT_EQ(30LL * 86400 * 1000, trips->FindColumn("STATUS")->ttl_ms);
  EXPECT_EQ(500, trips->FindColumn("EPHEMERAL")->ttl_ms);
  EXPECT_EQ(nullptr, trips->FindColumn("base"));  // case-sensitive
  const DatastoreConfig* users = c.FindDatastore("users_2");
  ASSERT_NE(nullptr, users);
  ASSERT_EQ(1u, users->columns.size());
  EXPECT_EQ("PROFILE", users->columns[0].name);
  EXPECT_EQ(nullptr, c.FindDatastore("nope"));

  EXPECT_EQ("alpha", c.HostForShard(0).name);
  EXPECT_EQ("alpha", c.HostForShard(9).name);
  EXPECT_EQ("beta", c.HostForShard(10).name);
  EXPECT_EQ("beta", c.HostForShard(15).name);
  // One database per host: every shard of a host shares it.
  EXPECT_EQ("cx_alpha", c.DatabaseForShard(0));
  EXPECT_EQ("cx_alpha", c.DatabaseForShard(9));
  EXPECT_EQ("cx_beta", c.DatabaseForShard(15));
  EXPECT_EQ(0u, c.HostIndexForShard(9));
  EXPECT_EQ(1u, c.HostIndexForShard(10));
  EXPECT_EQ("cx_s15", c.LegacyShardDatabase(15));

  // The password comes from the environment variable named in the file.
  unsetenv("CELLAR_CONFIG_TEST_PASSWORD");
  EXPECT_EQ("", c.MysqlPassword());
  setenv("CELLAR_CONFIG_TEST_PASSWORD", "s3cret:;'", 1);
  EXPECT_EQ("s3cret:;'", c.MysqlPassword());
  unsetenv("CELLAR_CONFIG_TEST_PASSWORD");
}

TEST(ConfigTest, MinimalConfigGetsDefaults) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "mysql:\n  hosts: [ { shards: 0-63 } ]\ndatastores: [ { name: t, columns: { A: } } ]\n",
      "min.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ClusterConfig defaults;
  EXPECT_EQ(64u, r->shards);
  EXPECT_EQ("root", r->mysql.user);
  EXPECT_EQ("", r->mysql.password_env);
  EXPECT_EQ("", r->MysqlPassword());
  EXPECT_EQ("cellar", r->mysql.database_prefix);
  EXPECT_EQ(defaults.mysql.connect_timeout_ms, r->mysql.connect_timeout_ms);
  ASSERT_EQ(1u, r->mysql.hosts.size());
  EXPECT_EQ("db1", r->mysql.hosts[0].name);
  EXPECT_EQ("127.0.0.1", r->mysql.hosts[0].address);
  EXPECT_EQ(3306, r->mysql.hosts[0].port);
  EXPECT_EQ(1 << 20, r->limits.max_body_bytes);
  EXPECT_EQ(1000, r->limits.max_batch_cells);
  EXPECT_EQ(5000, r->limits.index_wait_ms);
  EXPECT_EQ("", r->kafka.brokers);
  EXPECT_EQ("cellar_db1", r->DatabaseForShard(63));
}

TEST(ConfigTest, HostsOwnListsOfShardRangesAfterAShardMoved) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "shards: 8\nmysql:\n  hosts:\n"
      "    - { name: a, shards: \"0-2,4\" }\n"
      "    - { name: b, shards: \"3, 5-7\" }\n"
      "datastores: [ { name: t, columns: { A: } } ]\n",
      "moved.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ("0-2,4", r->mysql.hosts[0].ShardList());
  EXPECT_EQ("3,5-7", r->mysql.hosts[1].ShardList());
  EXPECT_EQ("b", r->HostForShard(3).name);
  EXPECT_EQ("a", r->HostForShard(4).name);
  EXPECT_TRUE(r->mysql.hosts[0].Owns(4));
  EXPECT_FALSE(r->mysql.hosts[0].Owns(3));
  r = ParseClusterConfig(
      "shards: 8\nmysql:\n  hosts:\n"
      "    - { name: a, shards: \"0-2,x\" }\n"
      "    - { name: b, shards: \"2-7\" }\n"
      "datastores: [ { name: t, columns: { A: } } ]\n",
      "bad.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("expected shard ranges like 0-31 or 0-30,32, got '0-2,x'"));
}

TEST(ConfigTest, HostNamesMustBeUniqueIdentifiersThatFitADatabaseName) {
  Result<ClusterConfig> r = ParseClusterConfig(
      "mysql:\n  hosts:\n"
      "    - { name: \"a b\", shards: 0-9 }\n"
      "    - { name: same, shards: 10-19 }\n"
      "    - { name: same, shards: 20-63 }\n"
      "datastores: [ { name: t, columns: { A: } } ]\n",
      "hosts.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("hosts.yaml:3: mysql.hosts[0].name: must match [A-Za-z0-9_-]{1,32}"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("hosts.yaml:5: mysql.hosts[2].name: duplicate host name 'same'"));
  const std::string long_prefix(48, 'p');
  r = ParseClusterConfig("mysql:\n  database_prefix: " + long_prefix +
                             "\n  hosts: [ { name: abcdefghijklmnopq, shards: 0-63 } ]\n"
                             "datastores: [ { name: t, columns: { A: } } ]\n",
                         "long.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is over MariaDB's 64 characters"));
}

TEST(ConfigTest, LoadFromFileNamesTheFileInErrors) {
  const std::string good = testing::WriteTempFile(Yaml(), ".yaml");
  Result<ClusterConfig> ok = LoadClusterConfig(good);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(good, ok->source);
  EXPECT_EQ(2u, ok->mysql.hosts.size());

  const std::string yaml = Yaml("", "", "colour: blue\n");
  const std::string bad = testing::WriteTempFile(yaml, ".yaml");
  Result<ClusterConfig> r = LoadClusterConfig(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_EQ(bad + ":" + std::to_string(LineOf(yaml, "colour")) +
                ": colour: unknown key (allowed: shards mysql limits group_commit kafka relay "
                "purge datastores)",
            r.status().message());

  Result<ClusterConfig> missing = LoadClusterConfig(bad + ".does-not-exist");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, missing.status().code());
  EXPECT_EQ(bad + ".does-not-exist: cannot open config file", missing.status().message());
}

TEST(ConfigTest, IssueExampleBadTtl) {
  // The example of the issue, on line 12.
  const std::string yaml =
      "shards: 4\n"                                     // 1
      "mysql:\n"                                        // 2
      "  user: root\n"                                  // 3
      "  password_env: CELLAR_MYSQL_PASSWORD\n"         // 4
      "  hosts:\n"                                      // 5
      "    - { name: db1, port: 3306, shards: 0-1 }\n"  // 6
      "    - { name: db2, port: 3307, shards: 2-3 }\n"  // 7
      "datastores:\n"                                   // 8
      "  - name: trips\n"                               // 9
      "    columns:\n"                                  // 10
      "      STATUS: {}\n"                              // 11
      "      BASE: { ttl: thirty days }\n";             // 12
  EXPECT_THAT(Errors(yaml),
              ElementsAre("cellar.yaml:12: datastores[0].columns.BASE.ttl: expected a duration "
                          "like 30d"));
}

TEST(ConfigTest, BadDurations) {
  for (const std::string ttl :
       {"30", "d", "-5s", "1.5h", "30 days", "5w", "\"\"", "[1d]", "99999999999999999999d"}) {
    SCOPED_TRACE(ttl);
    const std::string yaml =
        Yaml("", "  - name: trips\n    columns:\n      BASE: { ttl: " + ttl + " }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "ttl:",
                                             "datastores[0].columns.BASE.ttl: "
                                             "expected a duration like 30d")));
  }
  for (const auto& [ttl, ms] : std::vector<std::pair<std::string, int64_t>>{{"0s", 0},
                                                                            {"500ms", 500},
                                                                            {"45s", 45000},
                                                                            {"15m", 900000},
                                                                            {"12h", 43200000},
                                                                            {"30d", 2592000000}}) {
    SCOPED_TRACE(ttl);
    Result<ClusterConfig> r = ParseClusterConfig(
        Yaml("", "  - name: trips\n    columns:\n      BASE: { ttl: " + ttl + " }\n"), "x");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(ms, r->datastores[0].columns[0].ttl_ms);
  }
}

// A duration whose millisecond value does not fit in int64 must be rejected,
// not wrapped around (ParseDurationMillis overflows: base/time.cc, see report).
TEST(ConfigTest, TtlOverflowIsRejected) {
  const std::string yaml =
      Yaml("", "  - name: trips\n    columns:\n      BASE: { ttl: 1000000000000d }\n");
  EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "ttl:",
                                           "datastores[0].columns.BASE.ttl: "
                                           "expected a duration like 30d")));
}

TEST(ConfigTest, UnknownKeysAtEveryLevel) {
  {
    const std::string yaml = Yaml("", "", "colour: blue\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "colour",
                                             "colour: unknown key (allowed: shards mysql limits "
                                             "group_commit kafka relay purge datastores)")));
  }
  {
    const std::string yaml = Yaml(
        "    - { name: db1, port: 3306, shards: 0-31 }\n"
        "    - { name: db2, port: 3307, shards: 32-63, weight: 2 }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "weight",
                                             "mysql.hosts[1].weight: unknown key (allowed: name "
                                             "address port shards tls)")));
  }
  {
    const std::string yaml = Yaml(
        "    - { name: db1, port: 3306, shards: 0-31 }\n"
        "    - { name: db2, port: 3307, shards: 32-63, tls: { mode: required, colour: blue } }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "colour",
                                             "mysql.hosts[1].tls.colour: unknown key (allowed: "
                                             "mode ca cert key)")));
  }
  {
    const std::string yaml =
        Yaml("", "  - name: trips\n    columns:\n      BASE: { ttl: 1d, index: yes }\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "index",
                               "datastores[0].columns.BASE.index: unknown key (allowed: ttl)")));
  }
  {
    const std::string yaml =
        Yaml("", "  - name: trips\n    owner: me\n    columns:\n      BASE: {}\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "owner",
                                             "datastores[0].owner: unknown key (allowed: name "
                                             "ttl columns)")));
  }
  {
    const std::string yaml = Yaml("", "", "limits:\n  max_body: 10\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "max_body",
                               "limits.max_body: unknown key (allowed: "
                               "max_body_bytes max_batch_cells max_log_limit index_wait)")));
  }
  {
    std::string yaml = Yaml();
    yaml.replace(yaml.find("  user: root\n"), 13, "  user: root\n  passwd: hunter2\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "passwd",
                               "mysql.passwd: unknown key (allowed: user password_env "
                               "database_prefix connect_timeout_ms io_timeout_ms "
                               "pool_size_per_host tls hosts)")));
  }
}

TEST(ConfigTest, OverlappingShardRanges) {
  const std::string yaml = Yaml(
      "    - { name: db1, port: 3306, shards: 0-40 }\n"
      "    - { name: db2, port: 3307, shards: 32-63 }\n");
  EXPECT_THAT(
      Errors(yaml),
      ElementsAre(
          At(yaml, "32-63", "mysql.hosts[1].shards: shard 32 is already owned by mysql.hosts[0]")));
  const std::string same = Yaml(
      "    - { name: db1, port: 3306, shards: 0-63 }\n"
      "    - { name: db2, port: 3307, shards: 7 }\n");
  EXPECT_THAT(Errors(same),
              ElementsAre(At(same, "shards: 7 ",
                             "mysql.hosts[1].shards: shard 7 is already owned by mysql.hosts[0]")));
}

TEST(ConfigTest, UnownedShards) {
  const std::string yaml = Yaml(
      "    - { name: db1, port: 3306, shards: 0-9 }\n"
      "    - { name: db2, port: 3307, shards: 12-20 }\n"
      "    - { name: db3, port: 3308, shards: 22-62 }\n");
  EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "db1",
                                           "mysql.hosts: shards 10-11, 21, 63 are owned by no "
                                           "host")));
}

TEST(ConfigTest, BadShardRanges) {
  for (const std::string range : {"a-b", "31-0", "0-", "-3", "0-31-40", "0..31", "x", "0-+5"}) {
    SCOPED_TRACE(range);
    const std::string yaml = Yaml("    - { name: db1, port: 3306, shards: \"" + range + "\" }\n");
    const std::vector<std::string> errors = Errors(yaml);
    ASSERT_EQ(2u, errors.size()) << ::testing::PrintToString(errors);
    EXPECT_EQ(At(yaml, "db1",
                 "mysql.hosts[0].shards: expected shard ranges like 0-31 or 0-30,32, got '" +
                     range + "'"),
              errors[0]);
    EXPECT_EQ(At(yaml, "db1", "mysql.hosts: shards 0-63 are owned by no host"), errors[1]);
  }
  const std::string out = Yaml("    - { name: db1, port: 3306, shards: 0-64 }\n");
  EXPECT_THAT(Errors(out),
              ElementsAre(At(out, "0-64",
                             "mysql.hosts[0].shards: shard 64 is out of range: the cluster has 64 "
                             "shards (0-63)"),
                          At(out, "0-64", "mysql.hosts: shards 0-63 are owned by no host")));
}

// A shard number beyond 32 bits must not wrap around to a valid shard
// (4294967359 = 2^32 + 63 would otherwise read as 63).
TEST(ConfigTest, HugeShardNumberIsOutOfRange) {
  const std::string yaml = Yaml("    - { name: db1, port: 3306, shards: 0-4294967359 }\n");
  EXPECT_THAT(Errors(yaml),
              ElementsAre(At(yaml, "db1",
                             "mysql.hosts[0].shards: shard 4294967359 is out of range: the "
                             "cluster has 64 shards (0-63)"),
                          At(yaml, "db1", "mysql.hosts: shards 0-63 are owned by no host")));
}

TEST(ConfigTest, BadDatastoreNames) {
  for (const std::string& name :
       std::vector<std::string>{"Trips", "1trips", "_trips", "trips-2", "trips.x",
                                std::string(49, 'a'), "\"trips'; DROP TABLE x; --\"", "\"\""}) {
    SCOPED_TRACE(name);
    const std::string yaml = Yaml("", "  - name: " + name + "\n    columns:\n      BASE: {}\n");
    std::string shown = name;
    if (shown.front() == '"') shown = shown.substr(1, shown.size() - 2);
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "  - name: ",
                                             "datastores[0].name: must match [a-z][a-z0-9_]{0,47}, "
                                             "got '" +
                                                 shown + "'")));
  }
  // The longest valid name is accepted.
  EXPECT_TRUE(
      ParseClusterConfig(
          Yaml("", "  - name: " + std::string(48, 'z') + "\n    columns:\n      BASE: {}\n"), "x")
          .ok());
}

TEST(ConfigTest, BadColumnNames) {
  for (const std::string& name :
       std::vector<std::string>{"1BASE", "_BASE", "BA-SE", "BA SE2", "\"BASE'; DROP TABLE x; --\"",
                                std::string(65, 'C')}) {
    SCOPED_TRACE(name);
    const std::string yaml = Yaml("", "  - name: trips\n    columns:\n      " + name + ": {}\n");
    std::string shown = name;
    if (shown.front() == '"') shown = shown.substr(1, shown.size() - 2);
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "      " + name.substr(0, 3),
                               "datastores[0].columns." + shown +
                                   ": column name must match [A-Za-z][A-Za-z0-9_]{0,63}")));
  }
  EXPECT_TRUE(
      ParseClusterConfig(
          Yaml("", "  - name: trips\n    columns:\n      " + std::string(64, 'C') + ": {}\n"), "x")
          .ok());
}

TEST(ConfigTest, DuplicateDatastore) {
  const std::string yaml = Yaml("",
                                "  - name: trips\n    columns:\n      BASE: {}\n"
                                "  - name: users\n    columns:\n      PROFILE: {}\n"
                                "  - name: trips # again\n    columns:\n      OTHER: {}\n");
  EXPECT_THAT(Errors(yaml),
              ElementsAre(At(yaml, "# again", "datastores[2].name: duplicate datastore 'trips'")));
}

// yaml-cpp keeps both entries of a repeated map key: a column listed twice
// must be an error, not two columns of the same name.
TEST(ConfigTest, DuplicateColumn) {
  const std::string yaml = Yaml("",
                                "  - name: trips\n    columns:\n      BASE: {}\n"
                                "      STATUS: {}\n      BASE: { ttl: 1d } # again\n");
  EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "# again",
                                           "datastores[0].columns.BASE: duplicate column "
                                           "'BASE'")));
}

TEST(ConfigTest, TypeAndRangeErrors) {
  {
    const std::string yaml = Yaml("    - { name: db1, port: http, shards: 0-63 }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "http",
                                             "mysql.hosts[0].port: expected an integer, got "
                                             "'http'")));
  }
  {
    const std::string yaml = Yaml("    - { name: db1, port: 70000, shards: 0-63 }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "70000",
                                             "mysql.hosts[0].port: must be between 1 and 65535, "
                                             "got 70000")));
  }
  {
    std::string yaml = Yaml();
    yaml.replace(0, 10, "shards: 0\n");
    const std::vector<std::string> errors = Errors(yaml);
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ("cellar.yaml:1: shards: must be between 1 and 65536, got 0", errors[0]);
  }
  {
    const std::string yaml = Yaml("", "", "limits: { max_body_bytes: 1 }\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "max_body_bytes",
                                             "limits.max_body_bytes: must be between 2 and "
                                             "1073741824, got 1")));
  }
  {
    const std::string yaml = Yaml("", "  - name: trips\n    columns: [BASE, STATUS]\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "columns:", "datastores[0].columns: expected a mapping")));
  }
  {
    const std::string yaml = Yaml("", "  - name: trips\n    columns: {}\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "columns:",
                                             "datastores[0].columns: a datastore needs at least "
                                             "one column")));
  }
  {
    const std::string yaml = Yaml("", "", "kafka: { topic_prefix: \"a b\" }\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "topic_prefix",
                               "kafka.topic_prefix: must be 1-100 of [A-Za-z0-9._-]")));
  }
  {
    std::string yaml = Yaml();
    yaml.replace(yaml.find("  user: root\n"), 13, "  database_prefix: Cellar\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "Cellar",
                                             "mysql.database_prefix: must match "
                                             "[a-z][a-z0-9_]{0,47}, got 'Cellar'")));
  }
}

TEST(ConfigTest, MissingRequiredKeys) {
  EXPECT_THAT(Errors("shards: 4\ndatastores: [ { name: t, columns: { A: } } ]\n"),
              ElementsAre("cellar.yaml:1: mysql: missing required key"));
  EXPECT_THAT(Errors("shards: 4\nmysql:\n  hosts: [ { shards: 0-3 } ]\n"),
              ElementsAre("cellar.yaml:1: datastores: missing required key"));
  const std::string yaml = "mysql:\n  user: root\ndatastores: [ { columns: { A: } } ]\n";
  EXPECT_THAT(Errors(yaml), ElementsAre("cellar.yaml:2: mysql.hosts: missing required key",
                                        "cellar.yaml:3: datastores[0].name: missing required key"));
}

TEST(ConfigTest, YamlSyntaxErrorNamesTheLine) {
  const std::vector<std::string> errors =
      Errors("shards: 4\nmysql:\n  hosts: [ { shards: 0-3 }\ndatastores: []\n");
  ASSERT_EQ(1u, errors.size());
  EXPECT_THAT(errors[0], ::testing::MatchesRegex("cellar\\.yaml:[3-4]: .+"));
  EXPECT_THAT(Errors("- just\n- a list\n"),
              ElementsAre("cellar.yaml:1: (top level): expected a mapping"));
  EXPECT_THAT(Errors(""), ElementsAre("cellar.yaml:1: (top level): expected a mapping"));
}

TEST(ConfigTest, SeveralErrorsAreCollectedAtOnce) {
  const std::string yaml =
      "shards: 64\n"
      "colour: blue\n"
      "mysql:\n"
      "  user: root\n"
      "  hosts:\n"
      "    - { name: db1, port: 3306, shards: 0-40 }\n"
      "    - { name: db2, port: 3307, shards: 32-62 }\n"
      "limits: { max_batch_cells: 0 }\n"
      "datastores:\n"
      "  - name: Trips\n"
      "    columns:\n"
      "      BASE: { ttl: soon }\n"
      "      bad-col: {}\n"
      "  - name: users\n"
      "    columns:\n"
      "      PROFILE: {}\n"
      "  - name: users\n"
      "    columns:\n"
      "      PROFILE: {}\n";
  EXPECT_THAT(
      Errors(yaml),
      UnorderedElementsAreArray(std::vector<std::string>{
          "cellar.yaml:2: colour: unknown key (allowed: shards mysql limits group_commit kafka "
          "relay purge datastores)",
          "cellar.yaml:7: mysql.hosts[1].shards: shard 32 is already owned by mysql.hosts[0]",
          "cellar.yaml:6: mysql.hosts: shards 63 are owned by no host",
          "cellar.yaml:8: limits.max_batch_cells: must be between 1 and 100000, got 0",
          "cellar.yaml:10: datastores[0].name: must match [a-z][a-z0-9_]{0,47}, got 'Trips'",
          "cellar.yaml:12: datastores[0].columns.BASE.ttl: expected a duration like 30d",
          "cellar.yaml:13: datastores[0].columns.bad-col: column name must match "
          "[A-Za-z][A-Za-z0-9_]{0,63}",
          "cellar.yaml:17: datastores[2].name: duplicate datastore 'users'",
      }));
}

// The keys added for #13/#14 reject bad values with file:line, like the rest.
TEST(ConfigTest, BadExactlyOnceAndPipeliningValuesAreErrors) {
  const std::string yaml = Yaml("", "",
                                "group_commit: { min_pipelined_cells: -1 }\n"
                                "relay: { exactly_once: maybe }\n");
  EXPECT_THAT(Errors(yaml),
              UnorderedElementsAreArray(std::vector<std::string>{
                  "cellar.yaml:7: group_commit.min_pipelined_cells: must be between 0 and "
                  "10000, got -1",
                  "cellar.yaml:8: relay.exactly_once: expected true or false",
              }));
}

// A datastore-level ttl is the default of its columns; a column's own ttl
// (even 0s: forever) wins. purge.interval is off by default.
TEST(ConfigTest, DatastoreDefaultTtlAndPurgeInterval) {
  {
    Result<ClusterConfig> r = ParseClusterConfig(Yaml(), "x");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(0, r->purge.interval_ms);
    EXPECT_EQ(0, r->datastores[0].ttl_ms);
  }
  Result<ClusterConfig> r = ParseClusterConfig(
      Yaml("",
           "  - name: trips\n    ttl: 7d\n    columns:\n      BASE: {}\n      STATUS: { ttl: 1h }\n"
           "      KEEP: { ttl: 0s }\n      PLAIN:\n",
           "purge:\n  interval: 15m\n"),
      "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DatastoreConfig& trips = r->datastores[0];
  EXPECT_EQ(7LL * 86400 * 1000, trips.ttl_ms);
  EXPECT_EQ(7LL * 86400 * 1000, trips.FindColumn("BASE")->ttl_ms);
  EXPECT_EQ(7LL * 86400 * 1000, trips.FindColumn("PLAIN")->ttl_ms);
  EXPECT_EQ(3600LL * 1000, trips.FindColumn("STATUS")->ttl_ms);
  EXPECT_EQ(0, trips.FindColumn("KEEP")->ttl_ms);
  EXPECT_EQ(15LL * 60 * 1000, r->purge.interval_ms);
}

TEST(ConfigTest, BadDatastoreTtlAndPurgeAreRejected) {
  {
    const std::string yaml =
        Yaml("", "  - name: trips\n    ttl: a week\n    columns:\n      BASE: {}\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "ttl:", "datastores[0].ttl: expected a duration like 30d")));
  }
  {
    const std::string yaml = Yaml("", "", "purge:\n  interval: hourly\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "interval", "purge.interval: expected a duration like 30d")));
  }
  {
    const std::string yaml = Yaml("", "", "purge:\n  interval: 1h\n  batch: 10\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "batch", "purge.batch: unknown key (allowed: interval)")));
  }
  {
    const std::string yaml = Yaml("", "", "purge: 1h\n");
    EXPECT_THAT(Errors(yaml), ElementsAre(At(yaml, "purge: 1h", "purge: expected a mapping")));
  }
}

TEST(ConfigTest, KafkaPropertiesAreAMapOfText) {
  const std::string yaml = Yaml("", "",
                                "kafka:\n"
                                "  brokers: b1:9093\n"
                                "  properties:\n"
                                "    security.protocol: SASL_SSL\n"
                                "    sasl.mechanisms: SCRAM-SHA-512\n"
                                "    socket.keepalive.enable: true\n"
                                "    statistics.interval.ms: 60000\n");
  auto r = ParseClusterConfig(yaml, "cellar.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kafka.properties,
            (std::map<std::string, std::string>{{"security.protocol", "SASL_SSL"},
                                                {"sasl.mechanisms", "SCRAM-SHA-512"},
                                                {"socket.keepalive.enable", "true"},
                                                {"statistics.interval.ms", "60000"}}));
  EXPECT_EQ(r->kafka.property_origins.at("sasl.mechanisms"),
            "cellar.yaml:" + std::to_string(LineOf(yaml, "sasl.mechanisms")));
  // Without the section: no properties.
  auto plain = ParseClusterConfig(Yaml(), "cellar.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->kafka.properties.empty());
}

TEST(ConfigTest, KafkaPropertiesCellarOwnsAreRefusedByName) {
  const std::string yaml = Yaml("", "",
                                "kafka:\n"
                                "  properties:\n"
                                "    client.id: fine\n"
                                "    bootstrap.servers: b1:9092\n"
                                "    enable.idempotence: false\n"
                                "    transactional.id: mine\n"
                                "    group.id: mine\n"
                                "    enable.auto.commit: true\n");
  const auto errors = Errors(yaml);
  ASSERT_EQ(errors.size(), 5u) << ::testing::PrintToString(errors);
  for (const char* key : {"bootstrap.servers", "enable.idempotence", "transactional.id", "group.id",
                          "enable.auto.commit"})
    EXPECT_THAT(errors, Contains(HasSubstr(At(yaml, std::string(key) + ":",
                                              std::string("kafka.properties.") + key +
                                                  ": is set by Cellar and cannot be configured"))))
        << key;
  EXPECT_THAT(errors, Contains(HasSubstr("use kafka.brokers")));
  EXPECT_TRUE(IsCellarOwnedKafkaProperty("enable.idempotence"));
  EXPECT_FALSE(IsCellarOwnedKafkaProperty("security.protocol"));
}

TEST(ConfigTest, KafkaPropertiesMustBeAMapOfScalars) {
  {
    const std::string yaml = Yaml("", "", "kafka:\n  properties: [a, b]\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "[a, b]", "kafka.properties: expected a mapping")));
  }
  {
    const std::string yaml = Yaml("", "", "kafka:\n  properties:\n    sasl.username: { a: 1 }\n");
    EXPECT_THAT(Errors(yaml),
                ElementsAre(At(yaml, "{ a: 1 }",
                               "kafka.properties.sasl.username: expected a scalar value (string, "
                               "number or boolean)")));
  }
}

TEST(ConfigTest, NameValidators) {
  EXPECT_TRUE(IsValidDatastoreName("trips"));
  EXPECT_TRUE(IsValidDatastoreName("a"));
  EXPECT_TRUE(IsValidDatastoreName("t_1"));
  EXPECT_TRUE(IsValidDatastoreName(std::string(48, 'x')));
  EXPECT_FALSE(IsValidDatastoreName(std::string(49, 'x')));
  EXPECT_FALSE(IsValidDatastoreName(""));
  EXPECT_FALSE(IsValidDatastoreName("Trips"));
  EXPECT_FALSE(IsValidDatastoreName("9t"));
  EXPECT_FALSE(IsValidDatastoreName("trips'; DROP TABLE x; --"));
  EXPECT_FALSE(IsValidDatastoreName("tri`ps"));
  EXPECT_FALSE(IsValidDatastoreName(std::string("tr\0ps", 5)));
  EXPECT_TRUE(IsValidColumnName("BASE"));
  EXPECT_TRUE(IsValidColumnName("b"));
  EXPECT_TRUE(IsValidColumnName("Base_2"));
  EXPECT_TRUE(IsValidColumnName(std::string(64, 'C')));
  EXPECT_FALSE(IsValidColumnName(std::string(65, 'C')));
  EXPECT_FALSE(IsValidColumnName(""));
  EXPECT_FALSE(IsValidColumnName("_BASE"));
  EXPECT_FALSE(IsValidColumnName("2BASE"));
  EXPECT_FALSE(IsValidColumnName("BASE'; DROP TABLE x; --"));
  EXPECT_FALSE(IsValidColumnName("BA`SE"));
  EXPECT_FALSE(IsValidColumnName("BASÉ"));
  EXPECT_FALSE(IsValidColumnName(std::string("BA\0SE", 5)));
}

}  // namespace
}  // namespace cellar
