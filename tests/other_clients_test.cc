// The change log as consumers of other runtimes read it, none of them written
// here and none of them Cellar code: Apache Kafka's own Java console consumer
// (org.apache.kafka.tools.consumer.ConsoleConsumer, the broker's jars),
// kafka-python (a pure-Python implementation of the protocol, pinned in
// tests/requirements.txt) and kcat (/usr/bin/kcat, Debian's kafkacat). Each
// reads the whole topic with isolation level read_committed as a child
// process with a timeout, and one checker (tests/cloudevents_consumer.py
// --check) applies the same rules to what each of them read:
//  - every record carries the CloudEvents headers (changelog/cell_event.h)
//    and its key is the value's row_key, in partition shard % partitions;
//  - every cell the test stored (12 rows x 4 versions, 3 erasures) arrives
//    exactly once: as many records as distinct ce_id values as events;
//  - per row and column, ref_keys arrive in increasing order.
// The relay runs in exactly-once mode (the default), and before it publishes,
// the topic gets a transaction of decoy records that is aborted: a client
// that ignored read_committed would show them, and kcat reading
// read_uncommitted must (so the check can tell).
// A client that is missing is a failure, not a skip (scripts/install-deps).
// Against the binary's private MariaDB and the local broker.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "changelog/cell_event.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/kafka_broker.h"
#include "testing/test_cluster.h"
#include "tests/trigger_test_util.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using ::testing::IsEmpty;

constexpr int kRows = 12;
constexpr int kVersions = 4;
constexpr int kErased = 3;
constexpr int kEvents = kRows * kVersions + kErased;

constexpr char kVenvPython[] = CELLAR_SOURCE_DIR "/.deps/venv/bin/python";
constexpr char kKcat[] = "/usr/bin/kcat";

// A client's run: wait status, stdout, stderr, wall time.
struct ClientRun {
  int status = -1;
  std::string out, err;
  double seconds = 0;
};

// Runs `args` to completion, killed after `timeout` (coreutils timeout: exit
// 124 then), with stdout and stderr captured apart.
ClientRun RunWithTimeout(std::vector<std::string> args, std::chrono::seconds timeout) {
  args.insert(args.begin(),
              {"/usr/bin/timeout", "--kill-after=5", std::to_string(timeout.count())});
  ClientRun r;
  const auto start = std::chrono::steady_clock::now();
  r.status = testing::RunCaptured(args, &r.out, &r.err);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

bool ExitedZero(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string Tail(const std::string& s, size_t n = 3000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

// One cluster for the suite: cells stored, an aborted transaction of decoys
// in the topic, then everything published by an exactly-once relay, stopped
// before any client reads.
class OtherClientsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ready_ = false;
    cluster_ = MakeCluster("oc", Broker());
    if (!cluster_) return;
    Cluster& c = *cluster_;
    EXPECT_TRUE(c.config.relay.exactly_once) << "exactly-once is the default relay mode";
    topic_ = ChangeLogTopic(c.config.kafka, "trips");
    // 12 rows x 4 versions of BASE written in ref_key order, then 3 of them erased.
    const std::vector<Uuid> rows = NewRows(kRows);
    for (int64_t v = 1; v <= kVersions; ++v)
      PutVersion(*c.store, rows, "BASE", v, [v](size_t i) {
        return nlohmann::json{{"i", i}, {"v", v}};
      });
    for (int i = 0; i < kErased; ++i) {
      auto r = c.store->Erase("trips", rows[i], "BASE");
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    // One decoy per partition, in a transaction that is aborted.
    ClientRun decoys =
        RunWithTimeout({kVenvPython, CELLAR_SOURCE_DIR "/tests/other_clients_kafka_python.py",
                        "abort", Broker().bootstrap(), topic_, std::to_string(kPartitions)},
                       60s);
    EXPECT_TRUE(ExitedZero(decoys.status)) << "planting the aborted transaction failed:\n"
                                           << decoys.out << Tail(decoys.err);
    auto relay = StartRelay(c.store.get(), "other-clients");
    if (!relay) return;
    EXPECT_TRUE(WaitFor([&] { return relay->stats().acknowledged >= kEvents; }, 60s))
        << "acknowledged " << relay->stats().acknowledged << " of " << kEvents;
    relay->Stop();
    ready_ = !::testing::Test::HasFailure() && ExitedZero(decoys.status);
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  // Checks `run`'s stdout (records in `format`, tests/cloudevents_consumer.py)
  // and returns the checker's summary (null after a test failure).
  static nlohmann::json Check(const std::string& client, const ClientRun& run,
                              const std::string& format) {
    const std::string records = testing::WriteTempFile(run.out, "." + format);
    const std::vector<std::string> args = {"/usr/bin/python3",
                                           CELLAR_SOURCE_DIR "/tests/cloudevents_consumer.py",
                                           "--check",
                                           "--topic-prefix",
                                           cluster_->config.kafka.topic_prefix,
                                           "--expected",
                                           std::to_string(kEvents),
                                           "--partitions",
                                           std::to_string(kPartitions),
                                           "--format",
                                           format,
                                           "--exactly-once",
                                           records};
    ClientRun check = RunWithTimeout(args, 60s);
    unlink(records.c_str());
    auto summary = nlohmann::json::parse(check.out, nullptr, false);
    std::cout << "[ other clients ] " << client << " read in " << std::fixed << std::setprecision(1)
              << run.seconds << " s: " << check.out << std::flush;
    EXPECT_TRUE(WIFEXITED(check.status)) << check.err;
    EXPECT_TRUE(summary.is_object())
        << "checker stdout: " << check.out << "\nchecker stderr: " << check.err;
    return summary.is_object() ? summary : nlohmann::json();
  }

  // What every read_committed client must have read.
  static void ExpectEveryEventOnce(const nlohmann::json& summary) {
    ASSERT_TRUE(summary.is_object());
    EXPECT_THAT(summary["errors"], IsEmpty()) << summary.dump(2);
    EXPECT_EQ(summary["records"], kEvents) << summary.dump();
    EXPECT_EQ(summary["distinct"], kEvents) << summary.dump();
    EXPECT_EQ(summary["duplicates"], 0) << summary.dump();
    EXPECT_EQ(summary["written"], kRows * kVersions) << summary.dump();
    EXPECT_EQ(summary["erased"], kErased) << summary.dump();
  }

  static std::vector<std::string> KcatArgs(const std::string& isolation_level) {
    return {kKcat,
            "-C",
            "-b",
            Broker().bootstrap(),
            "-t",
            topic_,
            "-X",
            "isolation.level=" + isolation_level,
            "-o",
            "beginning",
            "-e",  // exit at the end of every partition
            "-q",
            "-f",
            "%p\\t%o\\t%k\\t%h\\t%s\\n"};
  }

  static std::unique_ptr<Cluster> cluster_;
  static std::string topic_;
  static bool ready_;
};

std::unique_ptr<Cluster> OtherClientsTest::cluster_;
std::string OtherClientsTest::topic_;
bool OtherClientsTest::ready_ = false;

TEST_F(OtherClientsTest, JavaConsoleConsumerReadsEveryEventOnce) {
  ASSERT_TRUE(ready_);
  ASSERT_FALSE(testing::KafkaHome().empty()) << "Apache Kafka's jars: run scripts/install-deps";
  std::vector<std::string> args = testing::KafkaJavaCommand(128, true);
  ASSERT_EQ(access(args[0].c_str(), X_OK), 0) << args[0] << " (java) is missing";
  args.insert(args.end(),
              {"org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
               Broker().bootstrap(), "--topic", topic_, "--from-beginning", "--isolation-level",
               "read_committed", "--group", "other-clients-console-" + cluster_->prefix,
               // Exits once no record came for 10 s: nothing more is there.
               "--timeout-ms", "10000", "--property", "print.partition=true", "--property",
               "print.offset=true", "--property", "print.headers=true", "--property",
               "print.key=true", "--property", "print.value=true", "--property", "key.separator=\t",
               "--property", "headers.separator=,", "--property", "null.literal=null"});
  ClientRun run = RunWithTimeout(args, 120s);
  EXPECT_TRUE(ExitedZero(run.status)) << "status " << run.status << "\n" << Tail(run.err);
  ExpectEveryEventOnce(
      Check("java ConsoleConsumer (" + testing::InstalledKafkaVersion() + ")", run, "console"));
}

TEST_F(OtherClientsTest, KafkaPythonReadsEveryEventOnce) {
  ASSERT_TRUE(ready_);
  ASSERT_EQ(access(kVenvPython, X_OK), 0) << kVenvPython << ": run scripts/install-deps";
  ClientRun run =
      RunWithTimeout({kVenvPython, CELLAR_SOURCE_DIR "/tests/other_clients_kafka_python.py",
                      "consume", Broker().bootstrap(), topic_, std::to_string(kPartitions), "60"},
                     90s);
  EXPECT_TRUE(ExitedZero(run.status)) << "status " << run.status << "\n" << Tail(run.err);
  ExpectEveryEventOnce(Check("kafka-python", run, "jsonl"));
}

TEST_F(OtherClientsTest, KcatReadsEveryEventOnce) {
  ASSERT_TRUE(ready_);
  ASSERT_EQ(access(kKcat, X_OK), 0) << kKcat << " is missing (Debian package kafkacat)";
  ClientRun run = RunWithTimeout(KcatArgs("read_committed"), 60s);
  EXPECT_TRUE(ExitedZero(run.status)) << "status " << run.status << "\n" << Tail(run.err);
  ExpectEveryEventOnce(Check("kcat", run, "kcat"));
}

// The control: read_uncommitted shows the aborted decoys, and the checker
// says so. Without it, read_committed above might have filtered nothing.
TEST_F(OtherClientsTest, ReadUncommittedShowsTheAbortedDecoys) {
  ASSERT_TRUE(ready_);
  ASSERT_EQ(access(kKcat, X_OK), 0) << kKcat << " is missing (Debian package kafkacat)";
  ClientRun run = RunWithTimeout(KcatArgs("read_uncommitted"), 60s);
  EXPECT_TRUE(ExitedZero(run.status)) << "status " << run.status << "\n" << Tail(run.err);
  nlohmann::json summary = Check("kcat read_uncommitted", run, "kcat");
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["records"], kEvents + kPartitions) << summary.dump();
  EXPECT_EQ(summary["distinct"], kEvents) << summary.dump();
  ASSERT_EQ(summary["errors"].size(), static_cast<size_t>(kPartitions)) << summary.dump(2);
  for (const auto& e : summary["errors"])
    EXPECT_THAT(e.get<std::string>(), ::testing::HasSubstr("decoy")) << summary.dump(2);
}

}  // namespace
}  // namespace cellar::trigtest
