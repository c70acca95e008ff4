// cellar-indexer: keeps the YAML-defined indexes up to date from the change log.
//   cellar-indexer --config cellar.yaml --indexes config/examples/indexes [--metrics-address
//   host:port] [--drain-timeout-ms 30000]
// Exits 1 at start when Kafka cannot be used (changelog/kafka/kafka_start_check.h).
// Applies the definitions (creating missing tables/versions) at start. Runs
// until SIGTERM/SIGINT, then finishes queued events for up to
// --drain-timeout-ms (default 30 s) and the batches in flight, and commits offsets.
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/log.h"
#include "base/signal_wait.h"
#include "changelog/kafka/kafka_start_check.h"
#include "config/command_line.h"
#include "config/config_for_main.h"
#include "config/number_options.h"
#include "indexes/index_catalog.h"
#include "indexes/index_worker.h"
#include "server/metrics_endpoint.h"

int main(int argc, char** argv) {
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-indexer: maintain secondary indexes from the change log"};
  std::string config_path = "cellar.yaml", indexes_path = "indexes";
  cellar::IndexWorkerOptions opts;
  std::string metrics_address;
  app.add_option("--config", config_path, "cluster config (YAML)")->capture_default_str();
  app.add_option("--indexes", indexes_path, "index definition file or directory")
      ->capture_default_str();
  app.add_option("--metrics-address", metrics_address, "host:port serving /metrics");
  app.add_option("--concurrency", opts.concurrency, "batches applied in parallel (1-1024)")
      ->capture_default_str()
      ->transform(cellar::DecimalInteger<int>(1, 1024));
  app.add_option("--drain-timeout-ms", opts.drain_timeout_ms,
                 "on SIGTERM, how long queued events may still be applied (0-600000)")
      ->capture_default_str()
      ->transform(cellar::DecimalInteger<int>(0, 600000));
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  auto config = cellar::LoadClusterConfigForMain(config_path, "cellar-indexer");
  if (!config) return cellar::kUsageExitCode;
  auto defs = cellar::LoadIndexDefinitions(indexes_path, *config);
  if (!defs.ok()) {
    std::cerr << "cellar-indexer: invalid index definitions:\n" << defs.status().message() << "\n";
    return cellar::kUsageExitCode;
  }
  if (cellar::Status s = cellar::CheckKafkaAtStart(config->kafka); !s.ok()) {
    std::cerr << "cellar-indexer: " << s.ToString() << "\n";
    return 1;
  }
  auto store = cellar::CellStore::Open(*config);
  cellar::IndexCatalog catalog(store.get());
  for (const auto& d : *defs) {
    auto applied = catalog.Apply(d);
    if (!applied.ok()) {
      std::cerr << "cellar-indexer: apply " << d.table << ": " << applied.status().ToString()
                << "\n";
      return 1;
    }
    if (applied->version.state == cellar::IndexState::kBuilding)
      cellar::LogWarn("index", "version is building: run `cellar index backfill`",
                      {{"index", d.table}, {"version", std::to_string(applied->version.version)}});
  }
  cellar::MetricsRegistry metrics;
  std::unique_ptr<cellar::MetricsEndpoint> endpoint;
  if (int code = 0; !cellar::StartMetricsEndpointForMain(&metrics, metrics_address,
                                                         "cellar-indexer", &endpoint, &code))
    return code;
  opts.metrics = &metrics;
  cellar::IndexWorker worker(store.get(), *defs, opts);
  if (cellar::Status s = worker.Start(); !s.ok()) {
    std::cerr << "cellar-indexer: " << s.ToString() << "\n";
    return 1;
  }
  int sig = 0;
  while ((sig = cellar::WaitForTerminationSignal(10000)) == 0)
    cellar::LogInfo("index", "stats",
                    {{"lag_p50_ms", std::to_string(worker.LagQuantileMs(0.5))},
                     {"lag_p99_ms", std::to_string(worker.LagQuantileMs(0.99))}});
  cellar::LogInfo("index", "signal received; stopping", {{"signal", std::to_string(sig)}});
  worker.Stop();
  if (endpoint) endpoint->Stop();
  store->Close();
  return 0;
}
