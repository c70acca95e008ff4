#include "testing/mock_broker.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <stdexcept>

#include "base/listening_sockets.h"

namespace cellar::testing {

std::unique_ptr<MockBroker> MockBroker::Start(int brokers) {
  if (brokers < 1) throw std::runtime_error("MockBroker needs at least one broker");
  std::unique_ptr<MockBroker> b(new MockBroker());
  b->brokers_ = brokers;
  b->Create();
  return b;
}

MockBroker::~MockBroker() { Destroy(); }

void MockBroker::Create() {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The handle only hosts the mock cluster; it never talks to a broker.
  rd_kafka_conf_set(conf, "client.id", "cellar-local-broker", errstr, sizeof(errstr));
  // Hides the notice that this handle has no bootstrap.servers.
  rd_kafka_conf_set(conf, "log_level", "4", errstr, sizeof(errstr));
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (rk_ == nullptr) {
    rd_kafka_conf_destroy(conf);  // not taken over on failure
    throw std::runtime_error(std::string("MockBroker: rd_kafka_new: ") + errstr);
  }
  cluster_ = rd_kafka_mock_cluster_new(rk_, brokers_);
  if (cluster_ == nullptr) {
    Destroy();
    throw std::runtime_error("MockBroker: rd_kafka_mock_cluster_new failed");
  }
  bootstrap_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  DisableNagle();
}

void MockBroker::DisableNagle() { SetNoDelayOnListeningSockets(bootstrap_); }

void MockBroker::Destroy() {
  if (cluster_ != nullptr) rd_kafka_mock_cluster_destroy(cluster_);
  cluster_ = nullptr;
  if (rk_ != nullptr) rd_kafka_destroy(rk_);
  rk_ = nullptr;
  bootstrap_.clear();
}

Status MockBroker::CreateTopic(const std::string& topic, int partitions, int replication) {
  rd_kafka_resp_err_t err =
      rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, replication);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return InvalidArgument("MockBroker: creating topic " + topic + " (" +
                           std::to_string(partitions) + " partitions, replication " +
                           std::to_string(replication) + "): " + rd_kafka_err2str(err));
  }
  topics_.push_back({topic, partitions, replication});
  return Status::Ok();
}

void MockBroker::SetDown(bool down) {
  // Broker ids are 1..brokers_ (rd_kafka_mock_cluster_new).
  for (int id = 1; id <= brokers_; ++id) {
    if (down) {
      rd_kafka_mock_broker_set_down(cluster_, id);
    } else {
      rd_kafka_mock_broker_set_up(cluster_, id);
    }
  }
  if (!down) DisableNagle();  // the listeners are new
}

void MockBroker::Restart() {
  Destroy();
  Create();
  for (const Topic& t : topics_) {
    rd_kafka_resp_err_t err =
        rd_kafka_mock_topic_create(cluster_, t.name.c_str(), t.partitions, t.replication);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error("MockBroker: recreating topic " + t.name + ": " +
                               rd_kafka_err2str(err));
  }
}

}  // namespace cellar::testing
