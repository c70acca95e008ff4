// ClusterEnvironment: the private MariaDB server(s) and the local Kafka broker
// of one test binary, started once before its first test and stopped after its
// last (a ::testing::Environment). Every test binary that needs servers uses
// this one environment (StoreEnvironment adds a CellStore on top).
//
// Usage, at namespace scope in the test file:
//   testing::ClusterEnvironment* const env = testing::ClusterEnvironment::Register({
//       .servers = {"relaytest"}, .broker = true});
// Tests then use env->db(), env->broker(), env->dbs(). When a server cannot
// start, SetUp fails the run with the reason and db()/broker() abort.
//
// Threading: SetUp runs on the main thread before any test (PrivateMariaDb's
// PDEATHSIG is bound to the starting thread, so servers die with the binary).
//
// Header-only: it needs gtest, which the testing library does not link.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"

namespace cellar::testing {

class ClusterEnvironment : public ::testing::Environment {
 public:
  struct Options {
    std::vector<std::string> servers = {"cellar"};  // one private MariaDB per label
    bool broker = true;                             // start a KafkaBroker
    // innodb_flush_log_at_trx_commit = 2: for suites that never crash a
    // server, trading durability for speed.
    bool relaxed_durability = false;
  };

  explicit ClusterEnvironment(Options options) : options_(std::move(options)) {}

  // Creates one, registers it with gtest (which owns it) and returns it.
  static ClusterEnvironment* Register(Options options) {
    return static_cast<ClusterEnvironment*>(
        ::testing::AddGlobalTestEnvironment(new ClusterEnvironment(std::move(options))));
  }

  void SetUp() override {
    try {
      for (const std::string& label : options_.servers) {
        dbs_.push_back(PrivateMariaDb::Start(label));
        if (options_.relaxed_durability)
          dbs_.back()->Execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
      }
      if (options_.broker) broker_ = KafkaBroker::Start();
    } catch (const std::exception& e) {
      FAIL() << "cannot start the test servers: " << e.what();
    }
  }

  void TearDown() override {
    broker_.reset();
    while (!dbs_.empty()) dbs_.pop_back();
  }

  // REQUIRES: SetUp succeeded (i < the number of servers; broker requested).
  PrivateMariaDb& db(size_t i = 0) const {
    if (i >= dbs_.size()) Die("no MariaDB server " + std::to_string(i));
    return *dbs_[i];
  }
  KafkaBroker& broker() const {
    if (broker_ == nullptr) Die("no local broker");
    return *broker_;
  }
  const std::vector<std::unique_ptr<PrivateMariaDb>>& dbs() const { return dbs_; }
  bool ready() const {
    return dbs_.size() == options_.servers.size() && (!options_.broker || broker_ != nullptr);
  }

 private:
  [[noreturn]] static void Die(const std::string& what) {
    std::fprintf(stderr, "ClusterEnvironment: %s (did SetUp fail?)\n", what.c_str());
    std::abort();
  }

  Options options_;
  std::vector<std::unique_ptr<PrivateMariaDb>> dbs_;
  std::unique_ptr<KafkaBroker> broker_;
};

}  // namespace cellar::testing
