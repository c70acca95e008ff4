#include "testing/kafka_broker.h"

#include <librdkafka/rdkafka.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "changelog/kafka/kafka_producer.h"
#include "config/cluster_config.h"
#include "testing/free_port.h"
#include "testing/wait_for.h"

#ifndef CELLAR_DEFAULT_KAFKA_HOME
#error "CELLAR_DEFAULT_KAFKA_HOME must name the checkout's .deps/kafka (testing/CMakeLists.txt)"
#endif

namespace cellar::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr int kStartTimeoutMs = 60'000;
constexpr int kPortAttempts = 3;

std::string JarVersion(const std::string& home) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(home + "/libs", ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "kafka_2.13-";
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 4 &&
        name.substr(name.size() - 4) == ".jar" && name.find("-test") == std::string::npos)
      return name.substr(prefix.size(), name.size() - prefix.size() - 4);
  }
  return "";
}

std::string JavaBinary() {
  const char* java_home = std::getenv("JAVA_HOME");
  if (java_home != nullptr && *java_home != '\0' &&
      fs::exists(std::string(java_home) + "/bin/java"))
    return std::string(java_home) + "/bin/java";
  return "/usr/bin/java";
}

// A KRaft cluster id: 16 random bytes, base64url without padding (Kafka's Uuid).
std::string RandomClusterId() {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;
  unsigned char bytes[16];
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rd());
  std::string out;
  int bits = 0, value = 0;
  for (unsigned char b : bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 6) {
      out += kAlphabet[(value >> (bits - 6)) & 63];
      bits -= 6;
    }
  }
  if (bits > 0) out += kAlphabet[(value << (6 - bits)) & 63];
  return out;  // 22 characters
}

std::string ReadTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Asks `bootstrap` for metadata of `topic` ("" = brokers only) with a
// throw-away librdkafka handle. Returns the partition count when every
// partition has a leader, 0 for brokers only, -1 when it does not answer or
// a partition has no leader yet.
int MetadataProbe(const std::string& bootstrap, const std::string& topic, int timeout_ms) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "log_level", "0", err, sizeof(err));  // refused connections are expected
  rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return -1;
  }
  int result = -1;
  rd_kafka_topic_t* rkt = topic.empty() ? nullptr : rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (topic.empty()) {
      result = md->broker_cnt > 0 ? 0 : -1;
    } else if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = md->topics[0].partition_cnt;
      for (int i = 0; i < md->topics[0].partition_cnt; ++i)
        if (md->topics[0].partitions[i].leader < 0) result = -1;
    }
    rd_kafka_metadata_destroy(md);
  }
  if (rkt != nullptr) rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  return result;
}

}  // namespace

std::string KafkaHome() {
  const char* env = std::getenv("CELLAR_KAFKA_HOME");
  const std::string home = env != nullptr && *env != '\0' ? env : CELLAR_DEFAULT_KAFKA_HOME;
  return JarVersion(home).empty() ? "" : home;
}

std::string InstalledKafkaVersion() {
  const std::string home = KafkaHome();
  return home.empty() ? "" : "apache-kafka-" + JarVersion(home);
}

std::vector<std::string> KafkaJavaCommand(int heap_mb, bool light_jvm) {
  std::vector<std::string> args = {JavaBinary(),
                                   "-Xms" + std::to_string(heap_mb) + "m",
                                   "-Xmx" + std::to_string(heap_mb) + "m",
                                   "-XX:-UsePerfData",
                                   "-Djava.awt.headless=true",
                                   "-Djava.net.preferIPv4Stack=true"};
  if (light_jvm) {
    args.insert(args.end(), {"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"});
  } else {  // as kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS)
    args.insert(args.end(),
                {"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                 "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"});
  }
  args.push_back("-cp");
  args.push_back(KafkaHome() + "/libs/*");
  return args;
}

std::unique_ptr<KafkaBroker> KafkaBroker::Start(KafkaBrokerOptions options) {
  std::unique_ptr<KafkaBroker> b(new KafkaBroker(std::move(options)));
  b->home_ = KafkaHome();
  if (b->home_.empty())
    throw std::runtime_error(
        "Apache Kafka is not installed (no kafka_2.13-*.jar in " +
        std::string(CELLAR_DEFAULT_KAFKA_HOME) +
        "/libs or $CELLAR_KAFKA_HOME/libs): run scripts/install-deps, which resolves "
        "deps/kafka/pom.xml with Maven");
  b->version_ = "apache-kafka-" + JarVersion(b->home_);
  std::string safe_label;
  for (char c : b->options_.label)
    safe_label += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (!b->options_.data_dir.empty()) {
    std::error_code ec;
    fs::create_directories(b->options_.data_dir, ec);
    if (ec) throw std::runtime_error("cannot create " + b->options_.data_dir + ": " + ec.message());
    b->dir_ = fs::canonical(b->options_.data_dir).string();
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/cellar-" + safe_label + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    b->dir_ = pattern;
  }
  b->Format();
  b->Launch();
  return b;
}

KafkaBroker::~KafkaBroker() {
  if (!options_.data_dir.empty()) {
    SetDown(true);
    return;
  }
  jvm_.reset();  // SIGKILL + reap
  if (dir_.empty()) return;
  if (std::getenv("CELLAR_KEEP_TEST_DIRS") != nullptr) {
    std::cerr << "KafkaBroker " << options_.label << ": keeping " << dir_ << "\n";
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

pid_t KafkaBroker::pid() const { return jvm_ != nullptr && jvm_->running() ? jvm_->pid() : -1; }

void KafkaBroker::WriteProperties() const {
  const std::string data = dir_ + "/data";
  std::ofstream p(dir_ + "/server.properties", std::ios::trunc);
  std::map<std::string, std::string> props = {
      {"process.roles", "broker,controller"},
      {"node.id", "1"},
      {"controller.quorum.voters", "1@127.0.0.1:" + std::to_string(controller_port_)},
      {"controller.listener.names", "CONTROLLER"},
      {"inter.broker.listener.name", "PLAINTEXT"},
      {"log.dirs", data},
      {"num.partitions", "4"},
      {"offsets.topic.replication.factor", "1"},
      {"offsets.topic.num.partitions", "4"},
      {"transaction.state.log.replication.factor", "1"},
      {"transaction.state.log.min.isr", "1"},
      {"transaction.state.log.num.partitions", "4"},
      {"group.initial.rebalance.delay.ms", "0"},
      // Tests use short consumer sessions (changelog/kafka/change_log_consumer.h).
      {"group.min.session.timeout.ms", "1000"},
      {"num.network.threads", "2"},
      {"num.io.threads", "2"},
      {"num.recovery.threads.per.data.dir", "1"},
      {"log.cleaner.threads", "1"},
      {"log.cleaner.dedupe.buffer.size", "4194304"},
      // Cellar's recommended setting (docs/design.md, The broker): Kafka 3.6+ checks
      // with the transaction coordinator before a transaction's first record
      // in each partition is written (KIP-890), one more round trip per
      // partition per transaction, which doubled the relay's commit-to-consume
      // latency; the relay rolls failed batches back with a producer epoch
      // bump instead (changelog/relay.h).
      {"transaction.partition.verification.enable", "false"},
  };
  std::string listeners = "PLAINTEXT://127.0.0.1:" + std::to_string(port_) +
                          ",CONTROLLER://127.0.0.1:" + std::to_string(controller_port_);
  std::string protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT";
  std::string advertised = "PLAINTEXT://127.0.0.1:" + std::to_string(port_);
  if (options_.sasl_ssl) {
    listeners += ",SASL_SSL://127.0.0.1:" + std::to_string(sasl_ssl_port_);
    advertised += ",SASL_SSL://127.0.0.1:" + std::to_string(sasl_ssl_port_);
    protocols += ",SASL_SSL:SASL_SSL";
    props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512";
    props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] =
        "org.apache.kafka.common.security.scram.ScramLoginModule required;";
    props["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM";
    props["listener.name.sasl_ssl.ssl.keystore.location"] =
        options_.sasl_ssl->key_and_certificate_pem;
    props["listener.name.sasl_ssl.ssl.client.auth"] = "none";
  }
  props["listeners"] = listeners;
  props["advertised.listeners"] = advertised;
  props["listener.security.protocol.map"] = protocols;
  for (const auto& [k, v] : options_.properties) props[k] = v;
  for (const auto& [k, v] : props) p << k << "=" << v << "\n";

  std::ofstream l(dir_ + "/log4j.properties", std::ios::trunc);
  l << "log4j.rootLogger=WARN, stdout\n"
       "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
       "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
       "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
       "log4j.logger.kafka.server.KafkaRaftServer=INFO\n";
}

void KafkaBroker::PickPorts() {
  port_ = FreeLoopbackPort();
  controller_port_ = FreeLoopbackPort();
  if (options_.sasl_ssl) sasl_ssl_port_ = FreeLoopbackPort();
  if (options_.jmx) jmx_port_ = FreeLoopbackPort();
}

void KafkaBroker::Format() {
  PickPorts();
  WriteProperties();
  // A kept data directory (options.data_dir) is formatted once: its cluster
  // id is in meta.properties, and formatting again with another one fails.
  if (fs::exists(dir_ + "/data/meta.properties")) return;
  std::vector<std::string> args = KafkaJavaCommand(64, true);
  args.insert(args.end(),
              {"-Dlog4j.configuration=file:" + dir_ + "/log4j.properties",
               "kafka.tools.StorageTool", "format", "--ignore-formatted",
               // '=': an id may start with '-'.
               "--cluster-id=" + RandomClusterId(), "--config", dir_ + "/server.properties"});
  if (options_.sasl_ssl) {
    args.push_back("--add-scram");
    args.push_back("SCRAM-SHA-512=[name=" + options_.sasl_ssl->user +
                   ",password=" + options_.sasl_ssl->password + "]");
  }
  const RunResult r = RunToExit(args, dir_ + "/format.log", milliseconds(60'000));
  if (r.exit_code != 0)
    throw std::runtime_error(options_.label + ": formatting Kafka's storage failed (exit " +
                             std::to_string(r.exit_code) + "):\n" + r.log);
}

void KafkaBroker::Launch() {
  for (int attempt = 0;; ++attempt) {
    WriteProperties();
    std::vector<std::string> args = KafkaJavaCommand(options_.heap_mb, options_.light_jvm);
    if (options_.jmx) {
      // The JVM's own JMX agent, on loopback only (registry and server on
      // one port), as Kafka's start script does with JMX_PORT.
      const std::string port = std::to_string(jmx_port_);
      args.insert(args.end(), {"-Dcom.sun.management.jmxremote.port=" + port,
                               "-Dcom.sun.management.jmxremote.rmi.port=" + port,
                               "-Dcom.sun.management.jmxremote.host=127.0.0.1",
                               "-Djava.rmi.server.hostname=127.0.0.1",
                               "-Dcom.sun.management.jmxremote.authenticate=false",
                               "-Dcom.sun.management.jmxremote.ssl=false"});
    }
    args.insert(args.end(), {"-Dlog4j.configuration=file:" + dir_ + "/log4j.properties",
                             "kafka.Kafka", dir_ + "/server.properties"});
    const std::string log = dir_ + "/broker.log";
    jvm_ = std::make_unique<ChildProcess>(args, log);
    if (!jvm_->running()) throw std::runtime_error(options_.label + ": cannot start " + args[0]);
    bootstrap_ = "127.0.0.1:" + std::to_string(port_);
    sasl_ssl_bootstrap_ = options_.sasl_ssl ? "127.0.0.1:" + std::to_string(sasl_ssl_port_) : "";
    bool exited = false;
    const bool up = WaitFor(
        [&] {
          if (jvm_->Exited()) {
            exited = true;
            return true;
          }
          return MetadataProbe(bootstrap_, "", 500) == 0;
        },
        milliseconds(kStartTimeoutMs), milliseconds(50));
    if (up && !exited) return;
    const std::string tail = ReadTail(log, 6000);
    const bool port_taken = tail.find("Address already in use") != std::string::npos;
    jvm_.reset();
    if (exited && port_taken && attempt + 1 < kPortAttempts) {
      // Another process took a port between FreeLoopbackPort() and the bind:
      // the storage is not tied to ports, so try new ones.
      PickPorts();
      continue;
    }
    throw std::runtime_error(options_.label + ": Kafka broker " +
                             (exited ? "exited during start-up" : "did not answer within 60 s") +
                             " (" + dir_ + "):\n" + tail);
  }
}

Result<std::map<std::string, uint64_t>> KafkaBroker::RequestCounts() const {
  if (!options_.jmx) return FailedPrecondition(options_.label + ": started without jmx");
  std::vector<std::string> args = KafkaJavaCommand(64, true);
  args.insert(
      args.end(),
      {"-Dlog4j.configuration=file:" + dir_ + "/log4j.properties", "org.apache.kafka.tools.JmxTool",
       "--one-time", "true", "--report-format", "properties", "--jmx-url",
       "service:jmx:rmi:///jndi/rmi://127.0.0.1:" + std::to_string(jmx_port_) + "/jmxrmi",
       "--object-name", "kafka.network:type=RequestMetrics,name=RequestsPerSec,*", "--attributes",
       "Count"});
  std::string out, err;
  const int status = RunCaptured(args, &out, &err);
  if (status != 0)
    return Unavailable(options_.label + ": JmxTool failed (wait status " + std::to_string(status) +
                       "): " + err + out);
  // One line per MBean: kafka.network:type=RequestMetrics,name=RequestsPerSec,
  // request=Produce,version=9:Count=123 (and a line "time=...").
  std::map<std::string, uint64_t> counts;
  std::istringstream lines(out);
  std::string line;
  const std::string request_key = "request=", count_key = ":Count=";
  while (std::getline(lines, line)) {
    const size_t r = line.find(request_key), c = line.rfind(count_key);
    if (r == std::string::npos || c == std::string::npos || c < r) continue;
    const size_t begin = r + request_key.size();
    const size_t end = line.find_first_of(",:", begin);
    const std::string type = line.substr(begin, end - begin);
    // Kafka also counts each Fetch a second time as FetchConsumer or FetchFollower.
    if (type == "FetchConsumer" || type == "FetchFollower") continue;
    const std::string value = line.substr(c + count_key.size());
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
      return Unavailable(options_.label + ": unexpected JmxTool line: " + line);
    counts[type] += std::stoull(value);
  }
  if (counts.empty()) return Unavailable(options_.label + ": JmxTool reported no requests: " + out);
  return counts;
}

Status KafkaBroker::CreateTopic(const std::string& topic, int partitions, int replication) {
  if (replication != 1)
    return InvalidArgument("KafkaBroker: one broker, so replication must be 1, not " +
                           std::to_string(replication));
  CELLAR_RETURN_IF_ERROR(CreateTopicAndWait(topic, partitions));
  for (const Topic& t : topics_)
    if (t.name == topic) return Status::Ok();
  topics_.push_back({topic, partitions});
  return Status::Ok();
}

Status KafkaBroker::CreateTopicAndWait(const std::string& topic, int partitions) const {
  KafkaConfig kafka;
  kafka.brokers = bootstrap_;
  CELLAR_ASSIGN_OR_RETURN(auto admin, KafkaProducer::Create(kafka, {}));
  CELLAR_RETURN_IF_ERROR(admin->EnsureTopic(topic, partitions, 30'000));
  int seen = -1;
  if (!WaitFor([&] { return (seen = MetadataProbe(bootstrap_, topic, 1000)) > 0; },
               milliseconds(30'000)))
    return Unavailable("KafkaBroker: topic " + topic + " has no leader for every partition");
  if (seen != partitions)
    return FailedPrecondition("KafkaBroker: topic " + topic + " exists with " +
                              std::to_string(seen) + " partitions, not " +
                              std::to_string(partitions));
  return Status::Ok();
}

Status KafkaBroker::DeleteRecords(const std::string& topic, int32_t partition,
                                  int64_t before_offset) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap_.c_str(), err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Unavailable(std::string("KafkaBroker: admin client: ") + err);
  }
  rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(offsets, topic.c_str(), partition)->offset = before_offset;
  rd_kafka_DeleteRecords_t* del = rd_kafka_DeleteRecords_new(offsets);
  rd_kafka_topic_partition_list_destroy(offsets);
  rd_kafka_queue_t* q = rd_kafka_queue_new(rk);
  rd_kafka_DeleteRecords(rk, &del, 1, nullptr, q);
  Status result = Unavailable("KafkaBroker: DeleteRecords " + topic + " did not answer in 30 s");
  if (rd_kafka_event_t* ev = rd_kafka_queue_poll(q, 30'000)) {
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = InvalidArgument(std::string("KafkaBroker: DeleteRecords: ") +
                               rd_kafka_event_error_string(ev));
    } else {
      const rd_kafka_topic_partition_list_t* done =
          rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
      result = Status::Ok();
      for (int i = 0; done != nullptr && i < done->cnt; ++i)
        if (done->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
          result = InvalidArgument("KafkaBroker: DeleteRecords " + topic + "/" +
                                   std::to_string(partition) + ": " +
                                   rd_kafka_err2str(done->elems[i].err));
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_DeleteRecords_destroy(del);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  return result;
}

void KafkaBroker::SetDown(bool down) {
  if (down) {
    if (jvm_ == nullptr) return;
    jvm_->Terminate(milliseconds(20'000));
    jvm_.reset();
    return;
  }
  if (jvm_ != nullptr && jvm_->running()) return;
  Launch();
}

void KafkaBroker::Kill() {
  if (jvm_ != nullptr) jvm_->Kill();
  jvm_.reset();
}

void KafkaBroker::RestartEmpty() {
  Kill();
  std::error_code ec;
  fs::remove_all(dir_ + "/data", ec);
  Format();  // new ports
  Launch();
  for (const Topic& t : topics_) {
    const Status s = CreateTopicAndWait(t.name, t.partitions);
    if (!s.ok())
      throw std::runtime_error("KafkaBroker: recreating topic " + t.name + ": " + s.ToString());
  }
}

}  // namespace cellar::testing
