// The benchmark harness's own login to the private MariaDB
// (bench/bench_harness_store.h): the server CPU of its connections is told
// apart from the cluster user's, and it can only read.
#include "bench/bench_harness_store.h"

#include <string>

#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"

namespace cellar::bench {
namespace {

// About a second of one core of the server's (MD5 three million times).
constexpr const char* kBurnServerCpu = "SELECT BENCHMARK(3000000, MD5('cellar'))";

TEST(BenchHarnessStoreTest, TheServerCpuOfTheHarnessLoginIsToldApart) {
  ClusterOptions options;
  options.shards = 4;
  Result<BenchCluster> cluster = OpenBenchCluster(options);
  ASSERT_OK(cluster.status());
  std::string missing;
  std::unique_ptr<CellStore> harness = OpenHarnessStore(*cluster, &missing);
  ASSERT_NE(harness, nullptr) << missing;
  ASSERT_OK(FillHarnessPools(*harness, 2));
  std::unique_ptr<CellStore> cellar = CellStore::Open(cluster->config);

  const std::optional<ServerThreadsCpu> before = HarnessServerCpu(*cluster);
  ASSERT_TRUE(before.has_value());
  EXPECT_GE(before->size(), 2u) << "the filled pool's connections";

  {  // The cluster's own user: not the harness's.
    Result<MysqlHostPool::Lease> lease = cellar->PoolForHost(0).Acquire();
    ASSERT_OK(lease.status());
    ASSERT_OK((*lease)->Query(kBurnServerCpu).status());
  }
  const std::optional<ServerThreadsCpu> between = HarnessServerCpu(*cluster);
  ASSERT_TRUE(between.has_value());
  EXPECT_LT(CpuSince(*before, *between), 0.05);

  {  // A connection of the filled pool, as the probes use them.
    Result<MysqlHostPool::Lease> lease = harness->PoolForHost(0).Acquire();
    ASSERT_OK(lease.status());
    ASSERT_OK((*lease)->Query(kBurnServerCpu).status());
    EXPECT_FALSE((*lease)->ExecuteDdl("CREATE DATABASE harness_may_not_write").ok())
        << "the harness's login only reads";
  }
  const std::optional<ServerThreadsCpu> after = HarnessServerCpu(*cluster);
  ASSERT_TRUE(after.has_value());
  EXPECT_GT(CpuSince(*between, *after), 0.1);

  // A thread missing from the earlier snapshot (a connection opened since,
  // maybe on a cached server thread with CPU of its own) is not counted.
  long busiest = -1;
  double most = -1;
  for (const auto& [tid, cpu] : *after)
    if (const auto was = between->find(tid); was != between->end() && cpu - was->second > most) {
      most = cpu - was->second;
      busiest = tid;
    }
  ServerThreadsCpu without_busiest = *between;
  without_busiest.erase(busiest);
  EXPECT_LT(CpuSince(without_busiest, *after), 0.05);
  EXPECT_EQ(0, CpuSince({}, *after));
  harness->Close();
  cellar->Close();
}

}  // namespace
}  // namespace cellar::bench
