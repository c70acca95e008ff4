#include "bench/bench_put_designs.h"

#include <algorithm>

#include "bench/bench_put_raw.h"

namespace cellar::bench {
namespace {

struct KindNames {
  const char* name;  // JSON "design"
  const char* text;  // table row
};

KindNames Names(ClosedLoopDesign::Kind k) {
  switch (k) {
    case ClosedLoopDesign::kFenced:
      return {"fenced", "fence SELECT + INSERT ... RETURNING + COMMIT"};
    case ClosedLoopDesign::kFused:
      return {"fused", "fence inside one autocommit INSERT ... RETURNING"};
    case ClosedLoopDesign::kBare:
      break;
  }
  return {"bare", "bare autocommit INSERT"};
}

RawWork Plan(const ClusterConfig& cfg, ClosedLoopDesign::Kind kind, int cells, int rows_per_tx,
             int body_bytes, std::mt19937_64& rng) {
  const std::string& datastore = cfg.datastores[0].name;
  const std::string& column = cfg.datastores[0].columns[0].name;
  switch (kind) {
    case ClosedLoopDesign::kFenced:
      return PlanFencedTransactions(cfg, datastore, column, cells, rows_per_tx, body_bytes, rng);
    case ClosedLoopDesign::kFused:
      return PlanFusedFenceStatements(cfg, datastore, column, cells, rows_per_tx, body_bytes, rng);
    case ClosedLoopDesign::kBare:
      break;
  }
  return PlanRawStatements(cfg, datastore, column, cells, rows_per_tx, body_bytes, rng);
}

}  // namespace

std::vector<ClosedLoopDesign> RunClosedLoopDesigns(const BenchCluster& cluster, int callers,
                                                   int cells, int body_bytes, int rounds,
                                                   std::mt19937_64& rng, int* exit_code) {
  std::vector<ClosedLoopDesign> out;
  *exit_code = 0;
  for (int w : {1, 2, 4, 8}) {
    if (w > callers) break;
    for (ClosedLoopDesign::Kind kind :
         {ClosedLoopDesign::kFenced, ClosedLoopDesign::kFused, ClosedLoopDesign::kBare}) {
      ClosedLoopDesign d;
      d.connections_per_host = w;
      d.rows_per_transaction = std::max(1, callers / w);
      d.kind = kind;
      const std::string name = "closed-loop design W=" + std::to_string(w) + " " +
                               Names(kind).name + " " + std::to_string(d.rows_per_transaction) +
                               " rows/tx";
      d.rounds = RunRawRounds(cluster, name, rounds,
                              {.connections_per_host = w,
                               .register_writers = kind != ClosedLoopDesign::kBare,
                               .keep_autocommit = kind == ClosedLoopDesign::kFused},
                              [&] {
                                return Plan(cluster.config, kind, cells, d.rows_per_transaction,
                                            body_bytes, rng);
                              });
      if (d.rounds.exit_code != 0) {
        *exit_code = d.rounds.exit_code;
        return {};
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

void AddClosedLoopDesignRows(Table& t, const std::vector<ClosedLoopDesign>& designs,
                             double raw_rows_per_s) {
  if (designs.empty()) return;
  t.Section("phase G: closed-loop designs in plain SQL (C rows in flight per host, W connections)");
  for (const ClosedLoopDesign& d : designs) {
    const double rate = d.rounds.median_rows_per_s;
    const double rows = static_cast<double>(d.rounds.total.rows);
    const double cpu_s = d.rounds.usage.client_cpu_s + d.rounds.usage.server_cpu_s.value_or(0);
    t.Add("W=" + std::to_string(d.connections_per_host) + ", " +
              std::to_string(d.rows_per_transaction) + " rows/tx, " + Names(d.kind).text,
          FormatNumber(rate, 0) + " rows/s, " + FormatNumber(rate / raw_rows_per_s, 3) +
              " x raw, " + FormatNumber(rows > 0 ? 1e6 * cpu_s / rows : 0, 1) + " us CPU per row");
  }
}

nlohmann::json ClosedLoopDesignsJson(const std::vector<ClosedLoopDesign>& designs,
                                     double raw_rows_per_s) {
  nlohmann::json a = nlohmann::json::array();
  for (const ClosedLoopDesign& d : designs) {
    a.push_back({{"connections", d.connections_per_host},
                 {"rows_per_transaction", d.rows_per_transaction},
                 {"design", Names(d.kind).name},
                 {"rows_per_s", Round(d.rounds.median_rows_per_s, 1)},
                 {"ratio", Round(d.rounds.median_rows_per_s / raw_rows_per_s, 3)}});
  }
  return a;
}

}  // namespace cellar::bench
