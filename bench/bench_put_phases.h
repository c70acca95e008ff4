// Measuring the phases of `cellar-bench put`: where the time goes (client and
// server CPU, server counters) and the repeated rounds of a raw SQL phase.
//
// Threading: call from the benchmark's main thread between phases.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/bench_put_raw.h"

namespace cellar::bench {

// Resources used so far: CPU of both processes and server counters.
struct Usage {
  double client_cpu_s = 0;
  std::optional<double> server_cpu_s;     // private MariaDB only
  std::map<std::string, int64_t> status;  // empty when it could not be read
};
Usage TakeUsage(const BenchCluster& cluster);

// What a phase used between two snapshots; deltas of several rounds add up.
struct UsageDelta {
  double client_cpu_s = 0;
  std::optional<double> server_cpu_s;
  std::map<std::string, int64_t> status;  // empty when it could not be read

  void Add(const Usage& a, const Usage& b);  // a: before the phase, b: after it
};

// Adds "where the time goes" rows for `rows` rows written in `seconds`.
void AddUsageRows(Table& t, const UsageDelta& u, double rows, double seconds);

// Rounds of one raw phase; the median round's rate counts (the machine may be shared).
struct RawRounds {
  std::vector<double> rates;  // rows/s of each round, in order
  double median_rows_per_s = 0;
  PhaseResult total;
  UsageDelta usage;
  int exit_code = 0;  // non-zero: the phase failed or was interrupted (reported)
};

// `rounds` rounds of RunRawPhase over plan() (called once per round, before
// its clock starts); `name` labels the progress lines.
RawRounds RunRawRounds(const BenchCluster& cluster, const std::string& name, int rounds,
                       const RawPhaseOptions& options, const std::function<RawWork()>& plan);
// As RunRawRounds with run(work) in place of RunRawPhase; `over` says what
// runs the work in the progress lines ("2 connection(s) per host").
RawRounds RunPhaseRounds(const BenchCluster& cluster, const std::string& name, int rounds,
                         const std::string& over, const std::function<RawWork()>& plan,
                         const std::function<PhaseResult(RawWork&)>& run);

}  // namespace cellar::bench
