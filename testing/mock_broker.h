// MockBroker: an in-process Kafka-protocol broker for tests, backed by
// librdkafka's mock cluster (rdkafka_mock.h).
//
// The mock cluster listens on 127.0.0.1 ephemeral ports and serves produce,
// fetch, metadata, offset commits and classic consumer groups from memory.
// Any librdkafka client (C or C++) in any process can connect to bootstrap().
// It does not support the CreateTopics admin API: create topics with
// CreateTopic(). Unknown topics are auto-created on metadata requests with the
// mock's default partition count (4), so create topics *before* clients
// use them. The first JoinGroup of a consumer group waits 3 s (the mock's
// fixed initial rebalance delay), so a subscribing consumer receives nothing
// for ~3 s.
//
// Thread safety: none; serialise calls on one MockBroker. Clients in other
// threads or processes may use the brokers at any time.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace cellar::testing {

class MockBroker {
 public:
  // Starts a mock cluster of `brokers` brokers (ids 1..brokers).
  // Throws std::runtime_error on failure.
  static std::unique_ptr<MockBroker> Start(int brokers = 1);

  // Destroys the mock cluster: its listeners close and all data is gone.
  ~MockBroker();

  MockBroker(const MockBroker&) = delete;
  MockBroker& operator=(const MockBroker&) = delete;

  // "127.0.0.1:port[,127.0.0.1:port...]", for bootstrap.servers.
  const std::string& bootstrap() const { return bootstrap_; }
  int brokers() const { return brokers_; }

  // Creates `topic` with `partitions` partitions. Errors from the mock are
  // returned as InvalidArgument. Note the mock does not check `replication`
  // against the broker count.
  Status CreateTopic(const std::string& topic, int partitions, int replication = 1);

  // down=true: every broker closes its connections and its listening socket,
  // so clients see "Connection refused"; down=false: each listens again on
  // its old port. Topics and messages are kept; no partition leader changes.
  // Clients back off exponentially while a broker is down (up to
  // reconnect.backoff.max.ms, default 10 s): tests that bring brokers back
  // should configure a small reconnect.backoff.max.ms.
  void SetDown(bool down);

  // Destroys the cluster and creates a new one with the same broker count.
  // All messages and committed offsets are lost. The new cluster listens on
  // NEW ports, so bootstrap() changes: clients built with the old address
  // cannot reconnect and must be recreated. Topics made with CreateTopic()
  // are created again, empty. Throws std::runtime_error on failure.
  void Restart();

 private:
  MockBroker() = default;
  void Create();   // throws
  void Destroy();  // idempotent
  // TCP_NODELAY on the listeners, as Kafka brokers set it (base/listening_sockets.h).
  void DisableNagle();

  int brokers_ = 1;
  rd_kafka_t* rk_ = nullptr;  // owns the cluster's threads
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string bootstrap_;
  struct Topic {
    std::string name;
    int partitions;
    int replication;
  };
  std::vector<Topic> topics_;  // recreated by Restart()
};

}  // namespace cellar::testing
