// Helpers shared by the index integration tests (indexes_test.cc,
// indexes_model_test.cc): the binary's MariaDB and local broker, a per-test
// cluster with an in-process relay and index worker, trip bodies, and a
// brute-force model of what an index must return, computed from the latest
// cells (shard logs) independently of the index code.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cells/cell_store.h"
#include "changelog/relay.h"
#include "config/cluster_config.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_maintenance.h"
#include "indexes/index_query.h"
#include "indexes/index_worker.h"
#include "testing/kafka_broker.h"
#include "testing/private_mariadb.h"
#include "testing/wait_for.h"
#include "tests/index_model.h"

namespace cellar::idxtest {

constexpr uint32_t kShards = 8;
constexpr int kPartitions = 4;

// The binary's MariaDB and broker (started once by a gtest Environment on the
// main thread, stopped after the last test).
testing::PrivateMariaDb& Db();
testing::KafkaBroker& Broker();

// Polls a condition until it holds or a deadline passes (testing/wait_for.h).
using ::cellar::testing::WaitFor;

// One test's cluster: `hosts` MySQL hosts db1..dbN (host databases
// <prefix>_db<n>, all on Db(), each owning an equal range of the kShards
// shards), change-log topics <prefix>.{trips,users}.cells (kPartitions each)
// on Broker(). The destructor
// stops the worker and the relay and closes the store.
struct Cluster {
  std::string prefix;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<Relay> relay;
  std::unique_ptr<IndexWorker> worker;

  ~Cluster();
  void StartRelay();
  void StartWorker(const std::vector<IndexDefinition>& defs, IndexWorkerOptions options = {});
  void StopWorker();
  // Consumer group lag of the index worker ("<prefix>.indexer") on the trips
  // and users change logs; -1 if it cannot be read.
  int64_t WorkerLag() const;
  // Every shard's relay checkpoint reached its head (all cells are in Kafka).
  bool RelayCaughtUp() const;
};
std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, int hosts = 1);
// The same on the given servers, one host each (names: the servers' labels).
// REQUIRES: !servers.empty(); each server outlives the cluster.
std::unique_ptr<Cluster> MakeCluster(const std::string& prefix,
                                     const std::vector<const testing::PrivateMariaDb*>& servers);

// The example config/examples/indexes/driver_partner_index.yaml.
IndexDefinition DriverPartnerDef(const ClusterConfig& config);
IndexDefinition ParseDef(const std::string& yaml, const ClusterConfig& config);

// Applies `def` and returns the version created or found.
IndexVersion ApplyIndex(CellStore& store, const IndexDefinition& def);

// ---------------------------------------------------------------------------
// Trips

struct Trip {
  Uuid driver;
  Uuid city;
  MicrosSinceEpoch when = 0;  // trip_created_at
  double fare = 0;
  std::string status = "completed";
  Uuid rider;
};
nlohmann::json TripBody(const Trip& t);
// A random trip over the given drivers and cities.
Trip RandomTrip(std::mt19937_64& rng, const std::vector<Uuid>& drivers,
                const std::vector<Uuid>& cities);
std::vector<Uuid> RandomUuids(int n);
// A random UUID whose shard (kShards) differs from / equals that of `other`.
Uuid UuidOnOtherShard(const Uuid& other);
Uuid UuidOnSameShard(const Uuid& other);
// Puts `body` as the next version of (row, BASE); returns the ref_key written.
int64_t PutTrip(CellStore& store, const Uuid& row, int64_t ref_key, const nlohmann::json& body);

// ---------------------------------------------------------------------------
// Brute force

// LatestCells, ModelHit, Model, QueryAll, ToHits, Diff: tests/index_model.h.

// Polls until QueryAll(q) equals the model of the latest cells (or timeout);
// returns the last difference ("" when equal).
std::string WaitForConverge(CellStore& store, IndexReader& reader, const IndexDefinition& def,
                            const IndexQuery& q,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30));
// Filters built with ParseIndexFilter (fails the test on a parse error).
IndexFilter Filter(const IndexDefinition& def, const std::string& text);

// Runs CheckIndex (no repair) and describes problems ("" when clean).
std::string CheckProblems(CellStore& store, const IndexDefinition& def);

// Hex of a row key without dashes (for SQL UNHEX()).
std::string RowHex(const Uuid& row);

// A query of driver_partner_index for `driver`'s trips.
IndexQuery ByDriver(const Uuid& driver, int limit = 1000);

// Number of entries of `row` in the index version's tables over all hosts.
int EntryCount(const Cluster& c, const std::string& table, int version, const Uuid& row);

}  // namespace cellar::idxtest
