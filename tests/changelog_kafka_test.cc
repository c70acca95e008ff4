// The change log as any Kafka client sees it, and Kafka settings by config:
//  - every record the relay publishes (both modes) carries the CloudEvents
//    headers (changelog/cell_event.h), checked by a plain Python client
//    (tests/cloudevents_consumer.py, Debian's python3-confluent-kafka);
//  - webhook requests carry the same attributes as ce-* HTTP headers;
//  - kafka.properties reach the clients (security.protocol), and a property
//    librdkafka refuses stops the relay at start with an error naming it;
//  - `cellar trigger status` prints exactly its JSON on stdout and no raw
//    librdkafka line on stderr (librdkafka logs go to Cellar's log).
// Against the binary's private MariaDB and the local broker.
#include <sys/wait.h>

#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "changelog/cell_event.h"
#include "changelog/kafka/change_log_consumer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "testing/webhook_sink.h"
#include "tests/trigger_test_util.h"
#include "triggers/webhook.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// `prefix`, or a new one when a test runs again in this process
// (--gtest_repeat): new databases and topics, nothing left from the last run.
std::string Fresh(const std::string& prefix) {
  static std::map<std::string, int> runs;
  const int run = ++runs[prefix];
  return run == 1 ? prefix : prefix + "_r" + std::to_string(run);
}

// `prefix`'s cluster YAML with `extra` lines inserted into its kafka section
// (indented two spaces, e.g. "  properties:\n    client.id: x\n").
std::string YamlWithKafka(const std::string& prefix, const std::string& extra) {
  std::string yaml = ClusterYaml(prefix, Broker().bootstrap());
  const size_t at = yaml.find('\n', yaml.find("  partitions:", yaml.find("kafka:\n")));
  yaml.insert(at + 1, extra);
  return yaml;
}

// A cluster from `yaml` (written to a file): topics created, store initialised.
std::unique_ptr<Cluster> ClusterFrom(const std::string& prefix, const std::string& yaml) {
  auto c = std::make_unique<Cluster>();
  c->prefix = prefix;
  c->yaml = yaml;
  c->config_path = testing::WriteTempFile(yaml, ".yaml");
  auto cfg = ParseClusterConfig(yaml, c->config_path);
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  CreateTopics(Broker(), prefix);
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? std::move(c) : nullptr;
}

struct Captured {
  int status = -1;  // waitpid status
  std::string out, err;
};
Captured RunCommand(const std::vector<std::string>& args) {
  Captured c;
  c.status = testing::RunCaptured(args, &c.out, &c.err);
  return c;
}

// ---------------------------------------------------------------------------

class CloudEventsTest : public ::testing::TestWithParam<bool> {};

TEST_P(CloudEventsTest, RelayRecordsCarryTheHeadersAPlainClientReads) {
  const bool exactly_once = GetParam();
  const std::string prefix = Fresh(exactly_once ? "ce_eo" : "ce_alo");
  auto c = ClusterFrom(prefix, ClusterYaml(prefix, Broker().bootstrap()) +
                                   "  exactly_once: " + (exactly_once ? "true" : "false") + "\n");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->config.relay.exactly_once, exactly_once);
  // 12 rows x 4 versions of BASE written in ref_key order, then 3 of them erased.
  const std::vector<Uuid> rows = NewRows(12);
  for (int64_t v = 1; v <= 4; ++v)
    PutVersion(*c->store, rows, "BASE", v, [v](size_t i) {
      return nlohmann::json{{"i", i}, {"v", v}};
    });
  for (size_t i = 0; i < 3; ++i) {
    auto r = c->store->Erase("trips", rows[i], "BASE");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto relay = StartRelay(c->store.get(), "ce");
  ASSERT_TRUE(relay);

  Captured py = RunCommand({"/usr/bin/python3", CELLAR_SOURCE_DIR "/tests/cloudevents_consumer.py",
                            Broker().bootstrap(), ChangeLogTopic(c->config.kafka, "trips"),
                            c->config.kafka.topic_prefix, std::to_string(kPartitions), "51", "30"});
  relay->Stop();
  std::cout << "[ cloudevents ] python3-confluent-kafka read: " << py.out;
  ASSERT_TRUE(WIFEXITED(py.status)) << py.err;
  auto summary = nlohmann::json::parse(py.out, nullptr, false);
  ASSERT_FALSE(summary.is_discarded()) << "stdout: " << py.out << "\nstderr: " << py.err;
  EXPECT_THAT(summary["errors"], IsEmpty()) << summary.dump(2);
  EXPECT_EQ(summary["written"], 48) << summary.dump();
  EXPECT_EQ(summary["erased"], 3) << summary.dump();
  EXPECT_EQ(WEXITSTATUS(py.status), 0) << py.out << py.err;
}

INSTANTIATE_TEST_SUITE_P(BothRelayModes, CloudEventsTest, ::testing::Bool(), [](const auto& info) {
  return info.param ? "ExactlyOnce" : "AtLeastOnce";
});

TEST(WebhookCloudEventsTest, RequestsCarryCeHeaders) {
  auto c = MakeCluster("ce_hook", Broker());
  ASSERT_TRUE(c);
  std::mutex mu;
  std::vector<testing::WebhookSink::Request> got;
  auto sink = testing::WebhookSink::StartWithHeaders([&](const testing::WebhookSink::Request& r) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(r);
    return 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  WebhookTriggerConfig hook;
  hook.name = "ce_hook";
  hook.datastore = "trips";
  hook.column = "BASE";
  hook.url = (*sink)->Url("/events");
  TriggerWorker worker(c->config, Opts("ce-hook"));
  ASSERT_TRUE(worker.on_webhook(hook).ok());
  ASSERT_TRUE(worker.Start().ok());
  auto relay = StartRelay(c->store.get(), "ce-hook");
  ASSERT_TRUE(relay);

  const Uuid row = Uuid::Random();
  auto put = c->store->Put("trips", CellWrite{row, "BASE", 7, nlohmann::json{{"a", 1}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !got.empty();
      },
      30s));
  worker.Stop();
  relay->Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_FALSE(got.empty());
  const auto& h = got.front().headers;
  auto header = [&](const std::string& name) {
    auto it = h.find(name);
    return it == h.end() ? std::string("(absent)") : it->second;
  };
  EXPECT_EQ(header("ce-specversion"), "1.0");
  EXPECT_EQ(header("ce-id"),
            "trips:" + std::to_string(put->shard) + ":" + std::to_string(put->added_id));
  EXPECT_EQ(header("ce-source"), "cellar://" + c->config.kafka.topic_prefix + "/trips");
  EXPECT_EQ(header("ce-type"), "cellar.cell.written");
  EXPECT_EQ(header("ce-time"), FormatRfc3339(put->created_at));
  EXPECT_EQ(header("ce-subject"), row.ToString() + "/BASE/7");
  EXPECT_EQ(header("content-type"), "application/json");
  auto event = DecodeCellEvent(got.front().body);  // the body is today's JSON
  ASSERT_TRUE(event.ok()) << event.status().ToString();
  EXPECT_EQ(event->cell.ref_key, 7);
}

// ---------------------------------------------------------------------------

TEST(KafkaPropertiesTest, APropertyReachesTheRelaysClients) {
  // plaintext is what the local broker speaks: the relay publishes.
  {
    const std::string prefix = Fresh("kp_plain");
    auto c = ClusterFrom(prefix, YamlWithKafka(prefix,
                                               "  properties:\n    security.protocol: plaintext\n"
                                               "    client.id: kp-plain\n"));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->config.kafka.properties.at("security.protocol"), "plaintext");
    auto relay = StartRelay(c->store.get(), "kp");
    ASSERT_TRUE(relay);
    ASSERT_TRUE(PutCell(*c->store, Uuid::Random(), "BASE", 1, {{"x", 1}}));
    EXPECT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= 1; }, 20s));
  }
  // ssl with a CA file that does not exist: librdkafka refuses the client,
  // and the relay does not start; the error names the property.
  {
    const std::string prefix = Fresh("kp_ssl");
    auto c = ClusterFrom(prefix, YamlWithKafka(prefix,
                                               "  properties:\n    security.protocol: ssl\n"
                                               "    ssl.ca.location: /nonexistent/ca.pem\n"));
    ASSERT_TRUE(c);
    Relay relay(c->store.get(), "kp-ssl");
    Status s = relay.Start();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("ssl.ca.location")) << s.ToString();
  }
  // A value librdkafka rejects: the error names the key and its file:line.
  {
    const std::string prefix = Fresh("kp_bad");
    auto c =
        ClusterFrom(prefix, YamlWithKafka(prefix, "  properties:\n    security.protocol: tls\n"));
    ASSERT_TRUE(c);
    Relay relay(c->store.get(), "kp-bad");
    Status s = relay.Start();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(c->config_path + ":"));
    EXPECT_THAT(s.message(), HasSubstr("kafka.properties.security.protocol"));
    EXPECT_THAT(s.message(), HasSubstr("tls"));
  }
}

// ---------------------------------------------------------------------------

// Every line of `err` is a structured log line (base/log.h); none is
// librdkafka's own format ("%4|1795623659.492|AUTOCREATE|...").
void ExpectOnlyStructuredLines(const std::string& err) {
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    EXPECT_EQ(line.rfind("ts=", 0), 0u) << "not a structured log line: " << line;
    EXPECT_THAT(line, ::testing::Not(HasSubstr("|rdkafka#"))) << line;
  }
}

TEST(QuietCliTest, TriggerStatusPrintsOnlyJson) {
  auto c = MakeCluster("ce_cli", Broker());
  ASSERT_TRUE(c);
  // Something to count: a trigger group with committed offsets is not needed,
  // the lag is measured from the topic's start.
  ASSERT_TRUE(PutCell(*c->store, Uuid::Random(), "BASE", 1, {{"x", 1}}));
  auto relay = StartRelay(c->store.get(), "cli");
  ASSERT_TRUE(relay);
  EXPECT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= 1; }, 20s));
  relay->Stop();

  Captured status = RunCommand(
      {CELLAR_BIN, "--config", c->config_path, "trigger", "status", "billing", "-d", "trips"});
  ASSERT_TRUE(WIFEXITED(status.status) && WEXITSTATUS(status.status) == 0)
      << status.out << status.err;
  auto json = nlohmann::json::parse(status.out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << "stdout is not exactly one JSON document:\n" << status.out;
  EXPECT_EQ(json["trigger"], "billing");
  EXPECT_GE(json["total_lag"].get<int64_t>(), 1) << json.dump();
  ExpectOnlyStructuredLines(status.err);
  EXPECT_THAT(status.err, ::testing::Not(HasSubstr("AUTOCREATE"))) << status.err;

  Captured tail = RunCommand({CELLAR_BIN, "--config", c->config_path, "log", "tail", "-d", "trips",
                              "--from-beginning", "-n", "1", "--idle-exit-ms", "10000"});
  ASSERT_TRUE(WIFEXITED(tail.status) && WEXITSTATUS(tail.status) == 0) << tail.out << tail.err;
  std::istringstream lines(tail.out);
  std::string first;
  ASSERT_TRUE(std::getline(lines, first)) << tail.err;
  auto event = nlohmann::json::parse(first, nullptr, false);
  ASSERT_FALSE(event.is_discarded()) << "not a JSON line: " << first;
  EXPECT_EQ(event["datastore"], "trips") << first;
  ExpectOnlyStructuredLines(tail.err);
}

}  // namespace
}  // namespace cellar::trigtest
