// Refused options of every Cellar program, run as the real binaries against
// the two private MariaDB servers of status_test (tests/cli_test_util.h):
// numbers are decimal and in range, addresses are HOST:PORT, and a refusal
// names the text, exits 2 and writes nothing.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/uuid.h"
#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "tests/cli_test_util.h"

namespace cellar {
namespace {

constexpr uint32_t kShards = 8;

// Whole numbers on the command line are decimal and must fit their option:
// CLI11 2.1 read them with strtoll/strtoull base 0, so `--ref 010` wrote
// ref_key 8, `--ref 0x20` 32, an out-of-range ref_key was written as
// INT64_MAX and `--after -1` read from 2^64-1.
TEST(CliBadInputTest, IntegersAreDecimalAndInRangeElseRefusedWithNothingWritten) {
  const std::string yaml = testing::MakeClusterYaml(CliServers(), kShards, "", "st_cli_num");
  const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
  auto cfg = ParseClusterConfig(yaml, config_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  ASSERT_EQ(store->Init().ToString(), "OK");
  const Uuid row = Uuid::Random();
  const std::string shard = std::to_string(ShardForRow(row, kShards));
  auto put = [&](const std::string& ref) {
    return RunCli(config_path, {"put", "-d", "trips", "-r", row.ToString(), "-c", "BASE", "--ref",
                                ref, "-b", "{\"a\":1}"});
  };
  struct Refused {
    std::vector<std::string> args;
    std::string option, value;
  };
  const std::vector<Refused> refused = {
      {{"--ref", "99999999999999999999"}, "--ref", "99999999999999999999"},
      {{"--ref", "-99999999999999999999"}, "--ref", "-99999999999999999999"},
      {{"--ref", "0x20"}, "--ref", "0x20"},
      {{"--ref", "1e3"}, "--ref", "1e3"},
      {{"--ref", " 7"}, "--ref", " 7"},
      {{"--ref", "+5"}, "--ref", "+5"},
      {{"--ref", ""}, "--ref", ""},
  };
  for (const Refused& r : refused) {
    CliResult res = put(r.args[1]);
    EXPECT_NE(res.code, 0) << r.value << ": " << res.out;
    EXPECT_NE(res.err.find(r.option), std::string::npos) << res.err;
    EXPECT_NE(res.err.find("'" + r.value + "'"), std::string::npos) << res.err;
    EXPECT_NE(res.err.find("whole number"), std::string::npos) << res.err;
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"log", "-d", "trips", "-s", shard, "--after", "-1"},
           {"log", "-d", "trips", "-s", shard, "--after", "18446744073709551616"},
           {"log", "-d", "trips", "-s", "-1"},
           {"versions", "-d", "trips", "-r", row.ToString(), "-c", "BASE", "--max-ref",
            "9223372036854775808"},
           {"log", "tail", "-d", "trips", "-n", "0x10"}}) {
    CliResult res = RunCli(config_path, args);
    EXPECT_NE(res.code, 0) << args[args.size() - 1] << ": " << res.out;
    EXPECT_NE(res.err.find("'" + args[args.size() - 1] + "'"), std::string::npos) << res.err;
  }
  auto log = store->ShardLog("trips", ShardForRow(row, kShards), 0, 100);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_TRUE(log->cells.empty()) << "a refused put wrote " << log->cells.size() << " cells";

  // A leading zero is still decimal: 010 is ten, as a person reads it.
  CliResult ten = put("010");
  ASSERT_EQ(ten.code, 0) << ten.err;
  EXPECT_EQ(ten.json["ref_key"], 10) << ten.out;
  CliResult max = put("9223372036854775807");
  ASSERT_EQ(max.code, 0) << max.err;
  EXPECT_EQ(max.json["ref_key"], INT64_MAX) << max.out;
  CliResult after = RunCli(config_path, {"log", "-d", "trips", "-s", shard, "--after", "0"});
  ASSERT_EQ(after.code, 0) << after.err;
  ASSERT_EQ(after.json["cells"].size(), 2u) << after.out;
  EXPECT_EQ(after.json["cells"][0]["ref_key"], 10);
}

// `cellar versions --since` (not older than) beside --as-of: both RFC 3339,
// since not after as_of; a bad one is refused naming it.
TEST(CliBadInputTest, VersionsSinceIsATimeNotAfterAsOf) {
  const std::string yaml = testing::MakeClusterYaml(CliServers(), kShards, "", "st_cli_since");
  const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
  auto cfg = ParseClusterConfig(yaml, config_path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto store = CellStore::Open(*cfg);
  ASSERT_EQ(store->Init().ToString(), "OK");
  const Uuid row = Uuid::Random();
  auto put = store->Put("trips", CellWrite{row, "BASE", 1, {{"a", 1}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto versions = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"versions", "-d", "trips", "-r", row.ToString(), "-c", "BASE"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(config_path, args);
  };
  const std::string at = FormatRfc3339(put->created_at);
  const std::string later = FormatRfc3339(put->created_at + 1);
  CliResult from = versions({"--since", at});
  ASSERT_EQ(from.code, 0) << from.err;
  ASSERT_TRUE(from.json.is_array()) << from.out;
  ASSERT_EQ(from.json.size(), 1u) << from.out;
  CliResult none = versions({"--since", later});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.json, nlohmann::json::array()) << none.out;
  CliResult garbled = versions({"--since", "yesterday"});
  EXPECT_NE(garbled.code, 0) << garbled.out;
  EXPECT_NE(garbled.err.find("--since"), std::string::npos) << garbled.err;
  EXPECT_NE(garbled.err.find("yesterday"), std::string::npos) << garbled.err;
  CliResult inverted = versions({"--since", later, "--as-of", at});
  EXPECT_NE(inverted.code, 0) << inverted.out;
  EXPECT_NE(inverted.err.find("since"), std::string::npos) << inverted.err;
}

// The worker mains, `cellard` and `cellar status --watch` read their numbers
// the same way. Before, `cellard --threads 0x10` served with 16 threads,
// `cellar-indexer --concurrency 0` and `cellar-relay --stats-interval-ms 0`
// were taken as given, `cellar-webhook-sink --listen host:abc` listened on any
// port (atoi gave 0), `cellar-broker --brokers 0x10` started 16 brokers (now --heap-mb) and
// `cellar status --watch 1abc` redrew every second. Each refusal ends the
// program before it starts anything, naming the text, with exit code 2 as
// `cellar` has (the other mains ended with CLI11's 105). An IPv6 address
// without brackets is refused rather than split at its last ':'.
TEST(CliBadInputTest, WorkerMainsAndWatchRefuseNumbersThatAreNotDecimalOrOutOfRange) {
  const std::string yaml = testing::MakeClusterYaml(CliServers(), kShards, "", "st_cli_mains");
  const std::string config_path = testing::WriteTempFile(yaml, ".yaml");
  struct Refused {
    std::string program;
    std::vector<std::string> args;
    std::string text;  // must appear quoted in stderr
  };
  const std::vector<Refused> refused = {
      {CELLAR_INDEXER_BIN, {"--config", config_path, "--concurrency", "0"}, "0"},
      {CELLAR_INDEXER_BIN, {"--config", config_path, "--concurrency", "0x10"}, "0x10"},
      {CELLAR_INDEXER_BIN,
       {"--config", config_path, "--concurrency", "99999999999"},
       "99999999999"},
      {CELLAR_INDEXER_BIN, {"--config", config_path, "--drain-timeout-ms", "30s"}, "30s"},
      {CELLAR_INDEXER_BIN, {"--config", config_path, "--drain-timeout-ms", "-1"}, "-1"},
      {CELLAR_TRIGGER_BIN,
       {"--config", config_path, "--triggers", config_path, "--drain-timeout-ms", "600001"},
       "600001"},
      {CELLAR_RELAY_BIN, {"--config", config_path, "--stats-interval-ms", "0"}, "0"},
      {CELLAR_RELAY_BIN, {"--config", config_path, "--stats-interval-ms", "-5"}, "-5"},
      {CELLAR_BROKER_BIN, {"--heap-mb", "0x10"}, "0x10"},
      {CELLAR_BROKER_BIN, {"--heap-mb", "63"}, "63"},
      {CELLAR_BROKER_BIN, {"--topic", "t:+5"}, "+5"},
      {CELLAR_BROKER_BIN, {"--topic", "t: 5"}, " 5"},
      {CELLAR_WEBHOOK_SINK_BIN,
       {"--out", "/dev/null", "--listen", "127.0.0.1:abc"},
       "127.0.0.1:abc"},
      {CELLAR_WEBHOOK_SINK_BIN,
       {"--out", "/dev/null", "--listen", "127.0.0.1:70000"},
       "127.0.0.1:70000"},
      {CELLAR_WEBHOOK_SINK_BIN, {"--out", "/dev/null", "--listen", ":8080"}, ":8080"},
      {CELLAR_WEBHOOK_SINK_BIN, {"--out", "/dev/null", "--listen", "::1:8080"}, "::1:8080"},
      {CELLARD_BIN, {"--config", config_path, "--threads", "0x10"}, "0x10"},
      {CELLARD_BIN, {"--config", config_path, "--max-request-bytes", "1e6"}, "1e6"},
      {CELLARD_BIN, {"--config", config_path, "--read-timeout-ms", "99999999999"}, "99999999999"},
      {CELLARD_BIN, {"--config", config_path, "--listen", "127.0.0.1:70000"}, "127.0.0.1:70000"},
      {CELLARD_BIN, {"--config", config_path, "--listen", "::1:0"}, "::1:0"},
      {CELLAR_BIN, {"--config", config_path, "status", "--watch", "1abc"}, "1abc"},
      {CELLAR_BIN, {"--config", config_path, "status", "--watch", "inf"}, "inf"},
      {CELLAR_BIN, {"--config", config_path, "status", "--watch", "1e-300"}, "1e-300"},
      {CELLAR_BIN, {"--config", config_path, "status", "--watch", "0"}, "0"},
  };
  for (const Refused& r : refused) {
    const std::string what = r.program + " ... " + r.args[r.args.size() - 2] + " " + r.text;
    CliResult res = RunProgram(r.program, r.args);
    EXPECT_EQ(res.code, 2) << what << ": " << res.out << res.err;
    EXPECT_NE(res.err.find("'" + r.text + "'"), std::string::npos) << what << ": " << res.err;
  }
  // An option no program knows is bad usage too, exit code 2 in every one
  // (the CLI11_PARSE mains exited 109 for it, and 105 for a refused value).
  const std::vector<std::pair<std::string, std::vector<std::string>>> unknown = {
      {CELLAR_BIN, {"--config", config_path, "status"}},
      {CELLARD_BIN, {"--config", config_path}},
      {CELLAR_RELAY_BIN, {"--config", config_path}},
      {CELLAR_INDEXER_BIN, {"--config", config_path}},
      {CELLAR_TRIGGER_BIN, {"--config", config_path, "--triggers", config_path}},
      {CELLAR_BROKER_BIN, {}},
      {CELLAR_WEBHOOK_SINK_BIN, {"--out", "/dev/null"}}};
  for (auto [program, args] : unknown) {
    args.insert(args.end(), {"--no-such-option", "1"});
    CliResult res = RunProgram(program, args);
    EXPECT_EQ(res.code, 2) << program << ": " << res.err;
    EXPECT_NE(res.err.find("--no-such-option"), std::string::npos) << program << ": " << res.err;
  }
}

}  // namespace
}  // namespace cellar
