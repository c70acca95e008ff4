// Cluster config loading: a valid file loads every value, defaults, hosts and
// shard ranges, kafka.properties and name validators. Refused configs (each
// bad case's "<file>:<line>: <key path>: <what>", several errors collected in
// one InvalidArgument) are in config_errors_test.cc.
#include <cstdlib>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "config/number_options.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/test_cluster.h"
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
      "  pool_idle_timeout: 90s\n"
      "  hosts:\n"
      "    - { name: alpha, address: 10.0.0.1, port: 3306, shards: 0-9 }\n"
      "    - name: beta\n"
      "      address: 10.0.0.2\n"
      "      port: 3307\n"
      "      shards: \"10-15\"\n"
      "limits: { max_body_bytes: 2048, max_batch_cells: 10, max_log_limit: 500, index_wait: 2s }\n"
      "group_commit: { max_batch_cells: 64, writer_threads_per_host: 2, min_pipelined_cells: 12,"
      " linger_us: 700, commit_interval_us: 1500 }\n"
      "kafka: { brokers: \"127.0.0.1:9092\", topic_prefix: cx.t, partitions: 4,"
      " max_event_body_bytes: 1000 }\n"
      "relay: { batch_cells: 10, poll_min_ms: 2, poll_max_ms: 20, target_batch_cells: 25,"
      " lock_retry_ms: 100,"
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
  EXPECT_EQ(90000, c.mysql.pool_idle_timeout_ms);
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
  EXPECT_EQ(700, c.group_commit.linger_us);
  EXPECT_EQ(1500, c.group_commit.commit_interval_us);
  EXPECT_EQ("127.0.0.1:9092", c.kafka.brokers);
  EXPECT_EQ("cx.t", c.kafka.topic_prefix);
  EXPECT_EQ(4, c.kafka.partitions);
  EXPECT_EQ(1000, c.kafka.max_event_body_bytes);
  EXPECT_EQ(10, c.relay.batch_cells);
  EXPECT_EQ(2, c.relay.poll_min_ms);
  EXPECT_EQ(20, c.relay.poll_max_ms);
  EXPECT_EQ(25, c.relay.target_batch_cells);
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

// Integers in the config are YAML 1.2 decimals ('+' allowed), read by the
// same parser as every other number a person types (base/number_text.h).
TEST(ConfigTest, IntegersAreDecimal) {
  auto with_shards = [](const std::string& shards) {
    return ParseClusterConfig("shards: " + shards +
                                  "\nmysql:\n  hosts: [ { shards: 0-7 } ]\n"
                                  "datastores: [ { name: t, columns: { A: } } ]\n",
                              "ints.yaml");
  };
  auto plus = with_shards("+8");
  ASSERT_TRUE(plus.ok()) << plus.status().ToString();
  EXPECT_EQ(8u, plus->shards);
  for (const std::string bad : {"0x8", "8.0", "99999999999999999999", "\" 8\"", "+-8"}) {
    auto r = with_shards(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("shards: expected an integer"), std::string::npos)
        << r.status().message();
  }
}

// DecimalInRange, the benchmark's options: CLI11 alone read "010" as 8 and
// "0x10" as 16 for an integer option, and let "nan" past CLI::Range.
TEST(NumberOptionsTest, DecimalInRangeReadsDecimalTextOnlyForIntegersAndFractions) {
  auto parse = [](const std::string& flag, const std::string& text, int* i, double* d) {
    CLI::App app;
    app.add_option("--count", *i)->transform(DecimalInRange(0, 1000));
    app.add_option("--seconds", *d)->transform(DecimalInRange(0.5, 3600));
    std::vector<std::string> args = {text, flag};  // CLI11 takes them in reverse
    try {
      app.parse(args);
      return std::string();
    } catch (const CLI::ParseError& e) {
      return std::string(e.what());
    }
  };
  int i = -1;
  double d = -1;
  EXPECT_EQ(parse("--count", "010", &i, &d), "");
  EXPECT_EQ(i, 10);
  EXPECT_EQ(parse("--count", "1000", &i, &d), "");
  EXPECT_EQ(i, 1000);
  EXPECT_EQ(parse("--seconds", "2.5", &i, &d), "");
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(parse("--seconds", "08", &i, &d), "");
  EXPECT_EQ(d, 8.0);
  for (const char* bad : {"0x10", "+5", " 5", "-1", "1001", "nan", "inf", ""})
    EXPECT_THAT(
        parse("--count", bad, &i, &d),
        ::testing::HasSubstr("'" + std::string(bad) + "' is not a decimal number from 0 to 1000"))
        << bad;
  // A fraction passes the range and then fails CLI11's integer conversion.
  for (const char* fraction : {"2.5", "1e3"})
    EXPECT_THAT(parse("--count", fraction, &i, &d), ::testing::HasSubstr(fraction)) << fraction;
  for (const char* bad : {"nan", "0.25", "1e9", "0x1p3", "inf"})
    EXPECT_THAT(
        parse("--seconds", bad, &i, &d),
        ::testing::HasSubstr("'" + std::string(bad) + "' is not a decimal number from 0.5 to 3600"))
        << bad;
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
