// Tests of the test support library itself: a private MariaDB survives a
// crash with its data, the local broker carries a message end to end, and the
// webhook sink hands every POST to its handler and answers its status.
#include <arpa/inet.h>
#include <httplib.h>
#include <librdkafka/rdkafkacpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "testing/kafka_broker.h"
#include "testing/mock_broker.h"
#include "testing/plain_topic_reader.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "testing/webhook_sink.h"

namespace cellar::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool TcpConnects(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Polls `cond` every 10 ms for up to 10 s.
template <typename F>
bool WaitUntil(F cond) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(PrivateMariaDbTest, DataSurvivesKillAndRestart) {
  auto start = Clock::now();
  auto db = PrivateMariaDb::Start("support");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::printf("PrivateMariaDb::Start took %lld ms (port %d, dir %s)\n", static_cast<long long>(ms),
              db->port(), db->dir().c_str());
  ASSERT_TRUE(db->running());
  ASSERT_TRUE(db->Execute(
      "CREATE DATABASE t; CREATE TABLE t.kv (k INT PRIMARY KEY, v VARCHAR(32)) ENGINE=InnoDB;"
      "INSERT INTO t.kv VALUES (1, 'one'), (2, 'two');"));

  db->Kill();
  EXPECT_FALSE(db->running());
  EXPECT_FALSE(TcpConnects(db->port()));
  EXPECT_FALSE(db->Execute("SELECT 1"));

  const int port = db->port();
  start = Clock::now();
  db->Restart();
  ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::printf("PrivateMariaDb::Restart after kill took %lld ms\n", static_cast<long long>(ms));
  EXPECT_EQ(port, db->port());
  std::string out;
  ASSERT_TRUE(db->Execute("SELECT k, v FROM t.kv ORDER BY k", &out));
  EXPECT_EQ("1\tone\n2\ttwo\n", out);

  db->Stop();
  EXPECT_FALSE(db->running());
  db->Restart();
  ASSERT_TRUE(db->Execute("SELECT COUNT(*) FROM t.kv", &out));
  EXPECT_EQ("2\n", out);

  // A restart fails, with the server's log in the message, if the port was taken meanwhile.
  db->Kill();
  int squatter = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;  // the port may have TIME_WAIT connections left
  ASSERT_EQ(0, setsockopt(squatter, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(0, bind(squatter, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  ASSERT_EQ(0, listen(squatter, 1));
  try {
    db->Restart();
    ADD_FAILURE() << "Restart succeeded on a taken port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("Bind on TCP/IP port")) << e.what();
  }
  EXPECT_FALSE(db->running());
  close(squatter);
  db->Restart();
  EXPECT_TRUE(db->Execute("SELECT 1"));

  const std::string dir = db->dir();
  db.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(TestClusterTest, ConfigSplitsShardsOverDatabases) {
  auto db1 = PrivateMariaDb::Start("db1");
  auto db2 = PrivateMariaDb::Start("db2");
  ClusterConfig cfg = MakeClusterConfig({db1.get(), db2.get()}, 7, "127.0.0.1:9092", "cx");
  ASSERT_EQ(2u, cfg.mysql.hosts.size());
  EXPECT_EQ("0-2", cfg.mysql.hosts[0].ShardList());
  EXPECT_EQ("3-6", cfg.mysql.hosts[1].ShardList());
  EXPECT_EQ(db2->port(), cfg.HostForShard(6).port);
  EXPECT_EQ("db1", cfg.mysql.hosts[0].name);
  EXPECT_EQ("cx_db2", cfg.DatabaseForShard(4));
  EXPECT_EQ("127.0.0.1:9092", cfg.kafka.brokers);
  const DatastoreConfig* trips = cfg.FindDatastore("trips");
  ASSERT_NE(nullptr, trips);
  ASSERT_NE(nullptr, trips->FindColumn("EPHEMERAL"));
  EXPECT_EQ(2000, trips->FindColumn("EPHEMERAL")->ttl_ms);
  ASSERT_NE(nullptr, cfg.FindDatastore("users"));

  const std::string path = WriteTempFile(MakeClusterYaml({db1.get()}, 4), ".yaml");
  Result<ClusterConfig> loaded = LoadClusterConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ("", loaded->kafka.brokers);

  std::string tmp;
  {
    TempDir t("support");
    tmp = t.path();
    std::ofstream(t.File("x")) << "x";
    EXPECT_TRUE(std::filesystem::exists(t.File("x")));
  }
  EXPECT_FALSE(std::filesystem::exists(tmp));
}

std::unique_ptr<RdKafka::Conf> MakeConf(const std::map<std::string, std::string>& kv) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : kv) {
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) {
      ADD_FAILURE() << k << "=" << v << ": " << err;
    }
  }
  return conf;
}

// A consumer in `group` subscribed to `topic`, reading it from the
// beginning; null (a test failure added) when librdkafka refuses.
std::unique_ptr<RdKafka::KafkaConsumer> SubscribedConsumer(const std::string& bootstrap,
                                                           const std::string& group,
                                                           const std::string& topic) {
  auto conf = MakeConf({{"bootstrap.servers", bootstrap},
                        {"group.id", group},
                        {"session.timeout.ms", "6000"},
                        {"auto.offset.reset", "earliest"}});
  std::string err;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (consumer == nullptr) {
    ADD_FAILURE() << "consumer: " << err;
  } else if (RdKafka::ErrorCode e = consumer->subscribe({topic}); e != RdKafka::ERR_NO_ERROR) {
    ADD_FAILURE() << "subscribe " << topic << ": " << RdKafka::err2str(e);
    consumer.reset();
  }
  return consumer;
}

TEST(MockBrokerTest, ProduceAndConsumeOneMessage) {
  auto broker = MockBroker::Start(1);
  ASSERT_FALSE(broker->bootstrap().empty());
  ASSERT_TRUE(broker->CreateTopic("support.test", 2).ok());

  std::string err;
  auto pconf = MakeConf({{"bootstrap.servers", broker->bootstrap()}});
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(pconf.get(), err));
  ASSERT_NE(nullptr, producer) << err;
  const std::string payload = "hello cellar";
  const std::string key = "k1";
  ASSERT_EQ(RdKafka::ERR_NO_ERROR,
            producer->produce("support.test", 1, RdKafka::Producer::RK_MSG_COPY,
                              const_cast<char*>(payload.data()), payload.size(), key.data(),
                              key.size(), 0, nullptr));
  ASSERT_EQ(RdKafka::ERR_NO_ERROR, producer->flush(10000));

  auto consumer = SubscribedConsumer(broker->bootstrap(), "support-test", "support.test");
  ASSERT_NE(nullptr, consumer);

  bool got = false;
  const auto consume_start = Clock::now();
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!got && Clock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> msg(consumer->consume(200));
    if (msg->err() == RdKafka::ERR__TIMED_OUT || msg->err() == RdKafka::ERR__PARTITION_EOF)
      continue;
    ASSERT_EQ(RdKafka::ERR_NO_ERROR, msg->err()) << msg->errstr();
    EXPECT_EQ(1, msg->partition());
    EXPECT_EQ(payload, std::string(static_cast<const char*>(msg->payload()), msg->len()));
    ASSERT_NE(nullptr, msg->key());
    EXPECT_EQ(key, *msg->key());
    got = true;
  }
  EXPECT_TRUE(got) << "no message within 30 s";
  std::printf("first message consumed after %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         Clock::now() - consume_start)
                                         .count()));
  consumer->close();
  consumer.reset();
  producer.reset();

  // SetDown closes the listeners; SetDown(false) reopens them on the same ports.
  const int broker_port = std::stoi(broker->bootstrap().substr(broker->bootstrap().rfind(':') + 1));
  broker->SetDown(true);
  EXPECT_TRUE(WaitUntil([&] { return !TcpConnects(broker_port); }));
  broker->SetDown(false);
  EXPECT_TRUE(WaitUntil([&] { return TcpConnects(broker_port); }));

  // Restart: data is gone, topics come back empty, at a new address.
  broker->Restart();
  ASSERT_FALSE(broker->bootstrap().empty());
  auto conf = MakeConf({{"bootstrap.servers", broker->bootstrap()}});
  producer.reset(RdKafka::Producer::create(conf.get(), err));
  ASSERT_NE(nullptr, producer) << err;
  std::unique_ptr<RdKafka::Topic> topic(
      RdKafka::Topic::create(producer.get(), "support.test", nullptr, err));
  RdKafka::Metadata* raw = nullptr;
  ASSERT_EQ(RdKafka::ERR_NO_ERROR, producer->metadata(false, topic.get(), &raw, 10000));
  std::unique_ptr<RdKafka::Metadata> md(raw);
  ASSERT_EQ(1u, md->topics()->size());
  EXPECT_EQ(2u, md->topics()->at(0)->partitions()->size());
  int64_t low = -1, high = -1;
  ASSERT_EQ(RdKafka::ERR_NO_ERROR,
            producer->query_watermark_offsets("support.test", 1, &low, &high, 10000));
  EXPECT_EQ(0, high);
}

// The private Apache Kafka broker: produce and consume; SetDown stops it and
// SetDown(false) brings it back on the same port with its records; a topic
// asked for with another partition count is refused with both numbers;
// RestartEmpty loses everything and moves to a new address.
TEST(KafkaBrokerTest, KeepsRecordsAcrossStopAndStartAndLosesThemOnRestartEmpty) {
  auto broker = KafkaBroker::Start();
  EXPECT_EQ(broker->version().rfind("apache-kafka-3.9.", 0), 0u) << broker->version();
  {  // the setting docker-compose.yml has too
    std::ifstream props(broker->dir() + "/server.properties");
    const std::string server((std::istreambuf_iterator<char>(props)), {});
    EXPECT_NE(server.find("\ntransaction.partition.verification.enable=false\n"), std::string::npos)
        << server;
  }
  const Status created = broker->CreateTopic("support.kafka", 2);
  ASSERT_TRUE(created.ok()) << created.ToString();
  ASSERT_TRUE(broker->CreateTopic("support.kafka", 2).ok()) << "the same topic again is OK";
  const Status other = broker->CreateTopic("support.kafka", 3);
  EXPECT_EQ(other.code(), StatusCode::kFailedPrecondition) << other.ToString();
  EXPECT_NE(other.message().find("has 2 partitions but Cellar needs 3"), std::string::npos)
      << other.ToString();

  std::string err;
  auto pconf = MakeConf({{"bootstrap.servers", broker->bootstrap()}, {"acks", "all"}});
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(pconf.get(), err));
  ASSERT_NE(nullptr, producer) << err;
  const std::string payload = "hello kafka";
  ASSERT_EQ(
      RdKafka::ERR_NO_ERROR,
      producer->produce("support.kafka", 1, RdKafka::Producer::RK_MSG_COPY,
                        const_cast<char*>(payload.data()), payload.size(), nullptr, 0, 0, nullptr));
  ASSERT_EQ(RdKafka::ERR_NO_ERROR, producer->flush(10000));
  producer.reset();
  // The high watermark of partition 1; -1 while the broker cannot tell (a
  // partition just created may answer NOT_LEADER for a moment).
  auto high = [&](const std::string& bootstrap) {
    auto conf = MakeConf({{"bootstrap.servers", bootstrap}});
    std::unique_ptr<RdKafka::Producer> p(RdKafka::Producer::create(conf.get(), err));
    int64_t low = -1, hi = -1;
    for (int attempt = 0; p && attempt < 50; ++attempt) {
      if (p->query_watermark_offsets("support.kafka", 1, &low, &hi, 5000) == RdKafka::ERR_NO_ERROR)
        return hi;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // retry after a refusal
    }
    return int64_t{-1};
  };
  EXPECT_EQ(high(broker->bootstrap()), 1);

  const int port = std::stoi(broker->bootstrap().substr(broker->bootstrap().rfind(':') + 1));
  broker->SetDown(true);
  EXPECT_FALSE(TcpConnects(port));
  EXPECT_EQ(broker->pid(), -1);
  broker->SetDown(false);
  EXPECT_TRUE(TcpConnects(port));
  EXPECT_EQ(high(broker->bootstrap()), 1) << "the record did not survive a stop and start";

  const std::string old_bootstrap = broker->bootstrap();
  broker->RestartEmpty();
  EXPECT_NE(broker->bootstrap(), old_bootstrap);
  EXPECT_EQ(high(broker->bootstrap()), 0) << "RestartEmpty kept records";

  const std::string dir = broker->dir();
  const pid_t pid = broker->pid();
  ASSERT_GT(pid, 0);
  broker.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_NE(::kill(pid, 0), 0) << "the JVM outlived its KafkaBroker";
}

// RequestCounts reads the broker's own request metrics: three produces
// flushed one by one are at least three more Produce requests.
TEST(KafkaBrokerTest, CountsTheRequestsItHandlesByType) {
  KafkaBrokerOptions options;
  options.label = "kafka-jmx";
  options.jmx = true;
  auto broker = KafkaBroker::Start(options);
  ASSERT_TRUE(broker->CreateTopic("support.counted", 1).ok());
  std::string err;
  auto pconf = MakeConf({{"bootstrap.servers", broker->bootstrap()}, {"acks", "all"}});
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(pconf.get(), err));
  ASSERT_NE(nullptr, producer) << err;
  ASSERT_EQ(RdKafka::ERR_NO_ERROR, producer->flush(10000));  // connected, metadata read

  const auto before = broker->RequestCounts();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_GT(before->count("Metadata"), 0u) << "clients asked for metadata";
  const std::string payload = "counted";
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(RdKafka::ERR_NO_ERROR,
              producer->produce("support.counted", 0, RdKafka::Producer::RK_MSG_COPY,
                                const_cast<char*>(payload.data()), payload.size(), nullptr, 0, 0,
                                nullptr));
    ASSERT_EQ(RdKafka::ERR_NO_ERROR, producer->flush(10000));
  }
  const auto after = broker->RequestCounts();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  const auto count = [](const std::map<std::string, uint64_t>& m, const char* type) {
    const auto it = m.find(type);
    return it == m.end() ? uint64_t{0} : it->second;
  };
  EXPECT_GE(count(*after, "Produce") - count(*before, "Produce"), 3u);

  // A consumer's fetches count once, as Fetch (Kafka counts them again as FetchConsumer).
  auto consumer = SubscribedConsumer(broker->bootstrap(), "support-counted", "support.counted");
  ASSERT_NE(nullptr, consumer);
  ASSERT_TRUE(WaitFor(
      [&] {
        std::unique_ptr<RdKafka::Message> msg(consumer->consume(200));
        return msg->err() == RdKafka::ERR_NO_ERROR;
      },
      std::chrono::seconds(30)));
  consumer->close();
  const auto fetched = broker->RequestCounts();
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_GT(count(*fetched, "Fetch"), 0u);
  EXPECT_EQ(fetched->count("FetchConsumer"), 0u) << "Fetch requests counted twice";
}

// The deployment file runs the Kafka version the tests run (deps/kafka/pom.xml)
// with the broker setting Cellar recommends.
TEST(KafkaBrokerTest, DockerComposeRunsTheVersionAndSettingsTheTestsRun) {
  const std::string version = InstalledKafkaVersion();
  ASSERT_EQ(version.rfind("apache-kafka-", 0), 0u) << "Kafka is not installed: " << version;
  std::ifstream compose(CELLAR_SOURCE_DIR "/docker-compose.yml");
  const std::string text((std::istreambuf_iterator<char>(compose)), {});
  ASSERT_FALSE(text.empty());
  const std::string image = "image: apache/kafka:" + version.substr(13) + "\n";
  EXPECT_NE(text.find(image), std::string::npos) << "docker-compose.yml lacks '" << image << "'";
  const std::string verification = "KAFKA_TRANSACTION_PARTITION_VERIFICATION_ENABLE: \"false\"\n";
  EXPECT_NE(text.find(verification), std::string::npos)
      << "docker-compose.yml lacks '" << verification << "'";
}

TEST(WebhookSinkTest, EveryPostReachesTheHandlerAndItsStatusIsAnswered) {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> received;
  auto sink = WebhookSink::Start([&](const std::string& path, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu);
    received.emplace_back(path, body);
    return path == "/down" ? 503 : 200;
  });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  ASSERT_GT((*sink)->port(), 0);
  EXPECT_EQ((*sink)->Url("/hook"), "http://127.0.0.1:" + std::to_string((*sink)->port()) + "/hook");

  httplib::Client client("127.0.0.1", (*sink)->port());
  auto ok = client.Post("/hook", R"({"a":1})", "application/json");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  auto down = client.Post("/down", "x", "text/plain");
  ASSERT_TRUE(down) << httplib::to_string(down.error());
  EXPECT_EQ(down->status, 503);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(received.size(), 2u);
    EXPECT_EQ(received[0], std::make_pair(std::string("/hook"), std::string(R"({"a":1})")));
    EXPECT_EQ(received[1], std::make_pair(std::string("/down"), std::string("x")));
  }
  const int port = (*sink)->port();
  sink->reset();  // stopped: nothing listens on the port any more
  EXPECT_FALSE(TcpConnects(port));
}

}  // namespace
}  // namespace cellar::testing
