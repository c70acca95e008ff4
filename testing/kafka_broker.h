// KafkaBroker: a private Apache Kafka broker for tests, benchmarks and the
// local stack: one single-node KRaft server (combined broker and controller)
// run from the jars scripts/install-deps resolved with Maven
// (deps/kafka/pom.xml -> .deps/kafka/libs).
//
// Start() makes a temporary directory under $TMPDIR (or /tmp), formats its
// storage, starts the JVM on free 127.0.0.1 ports with a small heap and waits
// until the broker answers a metadata request. Internal topics
// (__consumer_offsets, __transaction_state) have replication factor 1; a new
// consumer group rebalances at once (group.initial.rebalance.delay.ms=0);
// unknown topics are auto-created with 4 partitions.
//
// The JVM is a child of this process with PR_SET_PDEATHSIG=SIGKILL: it dies
// with the *thread* that called Start()/SetDown(false)/Restart*() (call them
// from a thread that outlives the broker, e.g. the test's main thread) and
// with the process, also when a test fails or crashes.
//
// Thread safety: none; serialise calls on one KafkaBroker. Clients in other
// threads or processes may use the broker at any time.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "testing/child_process.h"

namespace cellar::testing {

struct KafkaBrokerOptions {
  std::string label = "kafka";  // names the temp dir and errors
  int heap_mb = 256;            // -Xms = -Xmx
  // true: C1-only JIT and the serial collector, about half the CPU of
  // starting the JVM, slower and with longer pauses when busy (tests).
  // false: the JVM settings of Kafka's own start script (kafka-run-class.sh:
  // full JIT, G1 with 20 ms pause goals), the broker users run (benchmarks,
  // cellar-broker).
  bool light_jvm = true;
  // A second listener with SASL_SSL (SCRAM-SHA-512) besides the PLAINTEXT one
  // (sasl_ssl_bootstrap()). The user is created at format time.
  struct SaslSsl {
    std::string key_and_certificate_pem;  // file: PKCS#8 key, then the certificate chain
    std::string user;
    std::string password;
  };
  std::optional<SaslSsl> sasl_ssl{};
  // A directory to keep the broker's storage in across runs (formatted on
  // first use, kept on destruction, which then shuts the broker down
  // cleanly); "" = a temporary directory, removed on destruction.
  std::string data_dir{};
  // More server.properties (name -> value), over the defaults above.
  std::map<std::string, std::string> properties{};
  // Publish the broker's JMX MBeans on a free loopback port, without
  // authentication, for RequestCounts() (the benchmarks' Kafka requests per
  // write).
  bool jmx = false;
};

class KafkaBroker {
 public:
  // Starts a broker (see above), waiting up to 60 s. Throws
  // std::runtime_error naming the cause (Kafka not installed: run
  // scripts/install-deps; the JVM exited: the tail of its log); nothing is
  // left running and the temp dir is removed.
  static std::unique_ptr<KafkaBroker> Start(KafkaBrokerOptions options = {});

  // SIGKILLs the JVM (its data is thrown away anyway) and removes the temp
  // dir, unless CELLAR_KEEP_TEST_DIRS is set (then its path is printed).
  // With options.data_dir: SIGTERM (at most 20 s), and the directory stays.
  ~KafkaBroker();
  KafkaBroker(const KafkaBroker&) = delete;
  KafkaBroker& operator=(const KafkaBroker&) = delete;

  // "127.0.0.1:port" of the PLAINTEXT listener, for bootstrap.servers.
  const std::string& bootstrap() const { return bootstrap_; }
  // "127.0.0.1:port" of the SASL_SSL listener; "" without options.sasl_ssl.
  const std::string& sasl_ssl_bootstrap() const { return sasl_ssl_bootstrap_; }
  // "apache-kafka-3.9.1": what the benchmarks report as `broker`.
  const std::string& version() const { return version_; }
  pid_t pid() const;  // the JVM's; -1 while down
  const std::string& dir() const { return dir_; }

  // Creates `topic` with `partitions` partitions (Kafka's CreateTopics) and
  // waits until every partition has a leader. OK when it exists with that
  // many partitions; FailedPrecondition when it exists with another count;
  // Unavailable when the broker does not answer within 30 s. `replication`
  // other than 1 is InvalidArgument (one broker).
  Status CreateTopic(const std::string& topic, int partitions, int replication = 1);

  // Kafka's DeleteRecords: moves the log start of `partition` of `topic` to
  // `before_offset`, as retention does when it deletes old segments; older
  // records are gone for every reader. Unavailable when the broker does not
  // answer within 30 s, InvalidArgument naming Kafka's refusal otherwise.
  Status DeleteRecords(const std::string& topic, int32_t partition, int64_t before_offset);

  // The requests the broker has handled since it started, by request type
  // ("Produce", "Fetch", "EndTxn", ...; Kafka's kafka.network RequestMetrics
  // RequestsPerSec Count, summed over request versions; types never asked
  // for are absent; Kafka's second count of each Fetch, as FetchConsumer or
  // FetchFollower, is left out), read with Kafka's own JmxTool in a JVM of its own (about
  // 1-2 s of a core). REQUIRES: options.jmx. Unavailable naming the cause
  // (the tool's output) when they cannot be read.
  Result<std::map<std::string, uint64_t>> RequestCounts() const;

  // down=true: the broker shuts down (SIGTERM, at most 20 s, then SIGKILL),
  // so clients see "Connection refused". down=false: it starts again on the
  // same ports and data, and answers metadata on return. Topics, records,
  // committed offsets and transactions are kept. No-op when already so.
  // Throws std::runtime_error when it cannot start again.
  void SetDown(bool down);
  // SIGKILL: a crash (no controlled shutdown); SetDown(false) recovers.
  void Kill();

  // A new, empty broker in place of this one: the JVM is killed, its data
  // removed, and a freshly formatted broker starts on NEW ports, so
  // bootstrap() changes and clients of the old address must be recreated.
  // Topics made with CreateTopic() are created again, empty. Throws as Start.
  void RestartEmpty();

 private:
  explicit KafkaBroker(KafkaBrokerOptions options) : options_(std::move(options)) {}
  // Picks ports, writes the properties and formats the storage unless it is
  // formatted already (a kept data_dir). Throws.
  void Format();
  void PickPorts();  // free loopback ports for every listener (and JMX)
  void Launch();     // throws; starts the JVM on the chosen ports and waits
  void WriteProperties() const;
  Status CreateTopicAndWait(const std::string& topic, int partitions) const;

  KafkaBrokerOptions options_;
  std::string home_;  // the folder holding libs/
  std::string version_;
  std::string dir_;  // temp dir: server.properties, log4j.properties, data/, broker.log
  int port_ = 0;
  int controller_port_ = 0;
  int sasl_ssl_port_ = 0;
  int jmx_port_ = 0;  // with options.jmx
  std::string bootstrap_;
  std::string sasl_ssl_bootstrap_;
  std::unique_ptr<ChildProcess> jvm_;
  struct Topic {
    std::string name;
    int partitions;
  };
  std::vector<Topic> topics_;  // recreated by RestartEmpty()
};

// The folder holding Kafka's jars (libs/): $CELLAR_KAFKA_HOME, else the
// checkout's .deps/kafka. "" when neither holds a kafka_2.13-*.jar.
std::string KafkaHome();

// "apache-kafka-<version>" of the jars in KafkaHome(); "" when not installed.
std::string InstalledKafkaVersion();

// The java command line prefix that runs a class from KafkaHome()'s jars
// (java, a small heap, -cp libs/*); append the class and its arguments.
// REQUIRES: KafkaHome() is not empty.
std::vector<std::string> KafkaJavaCommand(int heap_mb, bool light_jvm);

}  // namespace cellar::testing
