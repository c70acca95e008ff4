// cellar-relay: publishes committed cells to the Kafka change log (see
// changelog/relay.h). Exits 1 at start when Kafka cannot be used
// (changelog/kafka/kafka_start_check.h). Runs until SIGTERM/SIGINT, then
// flushes, saves checkpoints, releases its shards and exits 0.
//   cellar-relay --config cellar.yaml [--id NAME] [--metrics-address host:port]
// --metrics-address serves the relay's metrics (changelog/relay_probe.h) at
// GET /metrics.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "base/log.h"
#include "base/signal_wait.h"
#include "cells/cell_store.h"
#include "changelog/kafka/kafka_start_check.h"
#include "changelog/relay.h"
#include "config/command_line.h"
#include "config/config_for_main.h"
#include "config/number_options.h"
#include "server/metrics_endpoint.h"

int main(int argc, char** argv) {
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-relay: publish committed cells to Kafka"};
  std::string config_path = "cellar.yaml";
  std::string relay_id = "relay-" + std::to_string(getpid());
  std::string metrics_address;
  int stats_every_ms = 10000;
  app.add_option("--config", config_path, "cluster config (YAML)")->capture_default_str();
  app.add_option("--id", relay_id, "name of this relay in logs")->capture_default_str();
  app.add_option("--stats-interval-ms", stats_every_ms, "log stats this often (100 ms to 1 day)")
      ->capture_default_str()
      ->transform(cellar::DecimalInteger<int>(100, 86400000));
  app.add_option("--metrics-address", metrics_address, "host:port serving /metrics");
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;

  auto config = cellar::LoadClusterConfigForMain(config_path, "cellar-relay");
  if (!config) return cellar::kUsageExitCode;
  cellar::MetricsRegistry metrics;
  std::unique_ptr<cellar::MetricsEndpoint> endpoint;
  if (int code = 0; !cellar::StartMetricsEndpointForMain(&metrics, metrics_address, "cellar-relay",
                                                         &endpoint, &code))
    return code;
  // A broker that cannot be used (refused, failed TLS or SASL) stops the
  // relay here, naming the cause, instead of a retry loop.
  if (cellar::Status s = cellar::CheckKafkaAtStart(config->kafka); !s.ok()) {
    std::cerr << "cellar-relay: " << s.ToString() << "\n";
    return 1;
  }
  auto store = cellar::CellStore::Open(*config);
  cellar::Relay relay(store.get(), relay_id, &metrics);
  if (cellar::Status s = relay.Start(); !s.ok()) {
    std::cerr << "cellar-relay: " << s.ToString() << "\n";
    return 1;
  }
  int sig = 0;
  while ((sig = cellar::WaitForTerminationSignal(stats_every_ms)) == 0) {
    auto st = relay.stats();
    cellar::LogInfo("relay", "stats",
                    {{"relay", relay_id},
                     {"owned_streams", std::to_string(st.owned_streams.size())},
                     {"published", std::to_string(st.published)},
                     {"acknowledged", std::to_string(st.acknowledged)},
                     {"rewinds", std::to_string(st.rewinds)}});
  }
  cellar::LogInfo("relay", "signal received; stopping", {{"signal", std::to_string(sig)}});
  relay.Stop();
  if (endpoint) endpoint->Stop();
  store->Close();
  return 0;
}
