#include "bench/bench_put_phases.h"

#include <algorithm>
#include <thread>

namespace cellar::bench {
namespace {

const std::vector<std::string> kStatusNames = {
    "QUESTIONS", "INNODB_DATA_FSYNCS", "COM_STMT_PREPARE", "COM_STMT_EXECUTE", "COM_COMMIT"};

}  // namespace

Usage TakeUsage(const BenchCluster& cluster) {
  Usage u;
  u.client_cpu_s = ProcessCpuSeconds();
  u.server_cpu_s = ServerCpuSeconds(cluster);
  auto st = ServerStatus(cluster.config, kStatusNames);
  if (st.ok()) u.status = std::move(st).value();
  return u;
}

void UsageDelta::Add(const Usage& a, const Usage& b) {
  client_cpu_s += b.client_cpu_s - a.client_cpu_s;
  if (a.server_cpu_s && b.server_cpu_s)
    server_cpu_s = server_cpu_s.value_or(0) + *b.server_cpu_s - *a.server_cpu_s;
  if (!a.status.empty() && !b.status.empty())
    for (const auto& name : kStatusNames) status[name] += b.status.at(name) - a.status.at(name);
}

void AddUsageRows(Table& t, const UsageDelta& u, double rows, double seconds) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  t.Add("client CPU per row (us)", FormatNumber(u.client_cpu_s / rows * 1e6, 1));
  if (u.server_cpu_s) {
    t.Add("server CPU per row (us)", FormatNumber(*u.server_cpu_s / rows * 1e6, 1));
    t.Add("CPU busy, client + server",
          FormatNumber(100.0 * (u.client_cpu_s + *u.server_cpu_s) / (seconds * cores), 0) +
              " % of " + FormatNumber(cores, 0) + " cores");
  }
  if (!u.status.empty()) {
    auto get = [&](const char* name) { return static_cast<double>(u.status.at(name)); };
    t.Add("SQL statements per row", FormatNumber(get("QUESTIONS") / rows, 2));
    t.Add("statement prepares", FormatNumber(get("COM_STMT_PREPARE"), 0));
    // A group transaction of one INSERT runs it with autocommit: no COMMIT.
    t.Add("prepared executions, COMMITs",
          FormatNumber(get("COM_STMT_EXECUTE"), 0) + ", " + FormatNumber(get("COM_COMMIT"), 0));
    const double fsyncs = get("INNODB_DATA_FSYNCS");
    t.Add("InnoDB fsyncs", FormatNumber(fsyncs, 0) + " (" +
                               FormatNumber(fsyncs > 0 ? rows / fsyncs : 0, 2) + " rows each)");
  }
}

RawRounds RunRawRounds(const BenchCluster& cluster, const std::string& name, int rounds,
                       const RawPhaseOptions& options, const std::function<RawWork()>& plan) {
  return RunPhaseRounds(cluster, name, rounds,
                        std::to_string(options.connections_per_host) + " connection(s) per host",
                        plan,
                        [&](RawWork& work) { return RunRawPhase(cluster.config, work, options); });
}

RawRounds RunPhaseRounds(const BenchCluster& cluster, const std::string& name, int rounds,
                         const std::string& over, const std::function<RawWork()>& plan,
                         const std::function<PhaseResult(RawWork&)>& run) {
  RawRounds out;
  for (int round = 1; round <= rounds && !StopRequested(); ++round) {
    RawWork work = plan();
    size_t transactions = 0, statements = 0;
    for (const auto& host : work) {
      transactions += host.size();
      for (const auto& tx : host) statements += tx.statements.size();
    }
    Progress(name + " round " + std::to_string(round) + "/" + std::to_string(rounds) + ": " +
             std::to_string(statements) + " statements in " + std::to_string(transactions) +
             " transactions over " + over);
    Usage before = TakeUsage(cluster);
    PhaseResult r = run(work);
    Usage after = TakeUsage(cluster);
    if (r.interrupted) break;
    if (r.errors > 0) {
      Progress(name + " failed (" + std::to_string(r.errors) + " errors), first: " + r.first_error);
      out.exit_code = 1;
      return out;
    }
    out.usage.Add(before, after);
    out.rates.push_back(r.rows / r.seconds);
    out.total.rows += r.rows;
    out.total.seconds += r.seconds;
  }
  if (StopRequested()) {
    Progress("interrupted");
    out.exit_code = 130;
    return out;
  }
  std::vector<double> sorted = out.rates;
  out.median_rows_per_s = Percentile(sorted, 50);
  return out;
}

}  // namespace cellar::bench
