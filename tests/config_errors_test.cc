// What a bad cluster config is refused with: every error at once, each naming
// file, line and key (config/cluster_config.h). The accepted configs are in
// config_test.cc.
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "tests/config_test_util.h"

namespace cellar {
namespace {

using config_test::At;
using config_test::Errors;
using config_test::LineOf;
using config_test::Yaml;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

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
  std::string bad_mysql_key = Yaml();
  bad_mysql_key.replace(bad_mysql_key.find("  user: root\n"), 13,
                        "  user: root\n  passwd: hunter2\n");
  struct Case {
    std::string yaml, needle, error;
  };
  const Case cases[] = {
      {Yaml("", "", "colour: blue\n"), "colour",
       "colour: unknown key (allowed: shards mysql limits group_commit kafka relay purge "
       "datastores)"},
      {Yaml("    - { name: db1, port: 3306, shards: 0-31 }\n"
            "    - { name: db2, port: 3307, shards: 32-63, weight: 2 }\n"),
       "weight",
       "mysql.hosts[1].weight: unknown key (allowed: name address port replicas replication shards "
       "tls)"},
      {Yaml("    - { name: db1, port: 3306, shards: 0-31 }\n"
            "    - { name: db2, port: 3307, shards: 32-63, tls: { mode: required, colour: blue } "
            "}\n"),
       "colour", "mysql.hosts[1].tls.colour: unknown key (allowed: mode ca cert key)"},
      {Yaml("", "  - name: trips\n    columns:\n      BASE: { ttl: 1d, index: yes }\n"), "index",
       "datastores[0].columns.BASE.index: unknown key (allowed: ttl)"},
      {Yaml("", "  - name: trips\n    owner: me\n    columns:\n      BASE: {}\n"), "owner",
       "datastores[0].owner: unknown key (allowed: name ttl columns)"},
      {Yaml("", "", "limits:\n  max_body: 10\n"), "max_body",
       "limits.max_body: unknown key (allowed: max_body_bytes max_batch_cells max_log_limit "
       "index_wait)"},
      {bad_mysql_key, "passwd",
       "mysql.passwd: unknown key (allowed: user password_env database_prefix connect_timeout_ms "
       "io_timeout_ms pool_size_per_host pool_idle_timeout tls topology_refresh hold_writes "
       "hosts)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.error);
    EXPECT_THAT(Errors(c.yaml), ElementsAre(At(c.yaml, c.needle, c.error)));
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

// The relay's idle back-off runs from poll_min_ms up to poll_max_ms: a
// maximum below the minimum (also below the default minimum) is refused.
TEST(ConfigTest, RelayPollMaxBelowPollMinIsAnError) {
  EXPECT_THAT(Errors(Yaml("", "", "relay: { poll_min_ms: 30, poll_max_ms: 10 }\n")),
              UnorderedElementsAreArray(std::vector<std::string>{
                  "cellar.yaml:7: relay.poll_max_ms: must be at least relay.poll_min_ms (30), "
                  "got 10",
              }));
  EXPECT_THAT(Errors(Yaml("", "", "relay: { poll_max_ms: 10 }\n")),
              UnorderedElementsAreArray(std::vector<std::string>{
                  "cellar.yaml:7: relay.poll_max_ms: must be at least relay.poll_min_ms (40), "
                  "got 10",
              }));
}

TEST(ConfigTest, RelayTargetBatchCellsOutOfRangeIsAnError) {
  EXPECT_THAT(Errors(Yaml("", "", "relay: { target_batch_cells: -1 }\n")),
              ElementsAre(HasSubstr("cellar.yaml:7: relay.target_batch_cells")));
}

// The keys added for #13/#14 reject bad values with file:line, like the rest.
TEST(ConfigTest, BadExactlyOnceAndPipeliningValuesAreErrors) {
  const std::string yaml = Yaml("", "",
                                "group_commit: { min_pipelined_cells: -1, linger_us: 200000,"
                                " commit_interval_us: -5 }\n"
                                "relay: { exactly_once: maybe }\n");
  EXPECT_THAT(Errors(yaml),
              UnorderedElementsAreArray(std::vector<std::string>{
                  "cellar.yaml:7: group_commit.min_pipelined_cells: must be between 0 and "
                  "10000, got -1",
                  "cellar.yaml:7: group_commit.linger_us: must be between 0 and 100000, got "
                  "200000",
                  "cellar.yaml:7: group_commit.commit_interval_us: must be between 0 and 100000, "
                  "got -5",
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

}  // namespace
}  // namespace cellar

namespace cellar {
namespace {

using config_test::At;
using config_test::Errors;
using config_test::Yaml;
using ::testing::UnorderedElementsAreArray;

// A host's replicas (docs/design.md, "Replicas and failover"): servers named by
// address:port, a replication mode, and the topology and hold settings.
TEST(ConfigTest, ReplicasReplicationModeAndFailoverSettings) {
  Result<ClusterConfig> r = ParseClusterConfig(
      Yaml("    - name: db1\n"
           "      address: 10.0.0.1\n"
           "      port: 3306\n"
           "      replicas: [ { address: 10.0.0.2, port: 3306 }, { address: 10.0.0.3, port: 3307 } "
           "]\n"
           "      shards: 0-31\n"
           "    - { name: db2, address: 10.0.0.4, port: 3306, replication: async, shards: 32-63,\n"
           "        replicas: [ { address: 10.0.0.5, port: 3306 } ] }\n",
           "", ""),
      "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const MysqlHostConfig& db1 = r->mysql.hosts[0];
  ASSERT_EQ(2u, db1.replicas.size());
  EXPECT_EQ("10.0.0.3:3307", db1.replicas[1].Label());
  EXPECT_EQ(ReplicationMode::kSemiSync, db1.replication);
  EXPECT_EQ(ReplicationMode::kAsync, r->mysql.hosts[1].replication);
  EXPECT_EQ(3u, db1.Servers().size());
  EXPECT_TRUE(db1.FindServer("10.0.0.2:3306").has_value());
  EXPECT_FALSE(db1.FindServer("10.0.0.5:3306").has_value());
  EXPECT_EQ(1000, r->mysql.topology_refresh_ms);
  EXPECT_EQ(10000, r->mysql.hold_writes_ms);
}

TEST(ConfigTest, PoolIdleTimeoutOutsideItsRangeIsRejected) {
  const std::string yaml =
      "shards: 64\n"
      "mysql:\n"
      "  pool_idle_timeout: 2d\n"
      "  hosts:\n"
      "    - { name: db1, address: h1, port: 3306, shards: 0-63 }\n"
      "datastores:\n"
      "  - name: trips\n"
      "    columns:\n"
      "      BASE: {}\n";
  EXPECT_THAT(Errors(yaml), ElementsAre("cellar.yaml:3: mysql.pool_idle_timeout: must be between "
                                        "0s and 24h, got 172800000ms"));
}

TEST(ConfigTest, BadReplicasAreRejected) {
  const std::string yaml =
      "shards: 64\n"
      "mysql:\n"
      "  user: root\n"
      "  topology_refresh: 5ms\n"
      "  hold_writes: 11m\n"
      "  hosts:\n"
      "    - { name: db1, address: h1, port: 3306, shards: 0-31, replication: sync,\n"
      "        replicas: [ { address: h2, port: 3306 }, { address: h2, port: 3306 } ] }\n"
      "    - { name: db2, address: h2, port: 3306, shards: 32-63,\n"
      "        replicas: [ { address: h1 }, { address: h9, port: 1, tls: {} } ] }\n"
      "datastores:\n"
      "  - name: trips\n"
      "    columns:\n"
      "      BASE: {}\n";
  EXPECT_THAT(
      Errors(yaml),
      UnorderedElementsAreArray(std::vector<std::string>{
          "cellar.yaml:4: mysql.topology_refresh: must be between 10ms and 60s, got 5ms",
          "cellar.yaml:5: mysql.hold_writes: must be between 0s and 600s, got 660000ms",
          "cellar.yaml:7: mysql.hosts[0].replication: expected semi_sync or async, got 'sync'",
          "cellar.yaml:8: mysql.hosts[0].replicas[1]: server h2:3306 is already this host's",
          "cellar.yaml:9: mysql.hosts[1]: server h2:3306 is already host db1's: hosts with "
          "replicas cannot share a server",
          "cellar.yaml:10: mysql.hosts[1].replicas[0].port: missing required key",
          "cellar.yaml:10: mysql.hosts[1].replicas[1].tls: unknown key (allowed: address port)",
      }));
}

}  // namespace
}  // namespace cellar
