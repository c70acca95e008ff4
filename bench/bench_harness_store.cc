#include "bench/bench_harness_store.h"

#include <algorithm>
#include <string>
#include <vector>

#include "cells/mysql_client.h"

namespace cellar::bench {

std::unique_ptr<CellStore> OpenHarnessStore(const BenchCluster& cluster, std::string* why_not) {
  if (!cluster.db) {
    *why_not = "no private MariaDB (--config): the harness reads as the cluster's user";
    return nullptr;
  }
  const std::string user = std::string("'") + kHarnessMysqlUser + "'@'%'";
  if (!cluster.db->Execute("CREATE USER IF NOT EXISTS " + user + "; GRANT SELECT ON *.* TO " +
                           user)) {
    *why_not = std::string("could not make the MySQL user ") + kHarnessMysqlUser;
    return nullptr;
  }
  ClusterConfig config = cluster.config;
  config.mysql.user = kHarnessMysqlUser;
  config.mysql.password_env.clear();  // made without a password, as the server's root
  return CellStore::Open(config);
}

std::optional<ServerThreadsCpu> HarnessServerCpu(const BenchCluster& cluster) {
  if (!cluster.db) return std::nullopt;
  const std::optional<long> pid = ServerPid(*cluster.db);
  if (!pid) return std::nullopt;
  auto conn = MysqlConnection::Connect(EndpointFor(cluster.config, cluster.config.mysql.hosts[0]));
  if (!conn.ok()) return std::nullopt;
  auto rows = (*conn)->Query("SELECT TID FROM information_schema.PROCESSLIST WHERE USER = ?",
                             {std::string(kHarnessMysqlUser)});
  if (!rows.ok()) return std::nullopt;
  ServerThreadsCpu out;
  for (const SqlRow& row : *rows) {
    const long tid = static_cast<long>(row.Int(0));
    if (const std::optional<double> cpu = OtherProcessCpuSeconds(*pid, tid)) out[tid] = *cpu;
  }
  return out;
}

double CpuSince(const ServerThreadsCpu& before, const ServerThreadsCpu& after) {
  double used = 0;
  for (const auto& [tid, cpu] : after)
    if (const auto was = before.find(tid); was != before.end())
      used += std::max(0.0, cpu - was->second);
  return used;
}

Status FillHarnessPools(CellStore& store, int connections) {
  for (size_t h = 0; h < store.config().mysql.hosts.size(); ++h) {
    std::vector<MysqlHostPool::Lease> held;
    for (int i = 0; i < connections; ++i) {
      CELLAR_ASSIGN_OR_RETURN(MysqlHostPool::Lease lease, store.PoolForHost(h).Acquire());
      held.push_back(std::move(lease));
    }
  }
  return Status::Ok();
}

}  // namespace cellar::bench
