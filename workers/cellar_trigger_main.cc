// cellar-trigger: runs the webhook triggers defined in YAML (triggers/trigger_config.h).
//   cellar-trigger --config cellar.yaml --triggers triggers.yaml [--metrics-address 127.0.0.1:9464]
//                  [--drain-timeout-ms 30000]
// Runs until SIGTERM/SIGINT, then drains (bound: trigger_worker.h), commits
// offsets, exits 0.
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/signal_wait.h"
#include "config/command_line.h"
#include "config/config_for_main.h"
#include "config/number_options.h"
#include "server/metrics_endpoint.h"
#include "triggers/trigger_worker.h"

int main(int argc, char** argv) {
  // Before any thread: the metrics endpoint's threads inherit the blocked
  // signals, so SIGTERM reaches run()'s wait.
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-trigger: run YAML-defined webhook triggers"};
  std::string config_path = "cellar.yaml", triggers_path, metrics_address;
  std::vector<std::string> only;
  app.add_option("--config", config_path, "cluster config (YAML)")->capture_default_str();
  app.add_option("--triggers", triggers_path, "trigger definitions (YAML)")->required();
  app.add_option("--metrics-address", metrics_address, "host:port serving /metrics");
  app.add_option("--only", only, "run only these triggers (repeatable)");
  cellar::TriggerWorkerOptions opts;
  app.add_option("--drain-timeout-ms", opts.drain_timeout_ms,
                 "on SIGTERM, how long queued events may still start (0-600000)")
      ->capture_default_str()
      ->transform(cellar::DecimalInteger<int>(0, 600000));
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;

  auto config = cellar::LoadClusterConfigForMain(config_path, "cellar-trigger");
  if (!config) return cellar::kUsageExitCode;
  auto defs = cellar::LoadTriggerDefinitions(triggers_path, *config);
  if (!defs.ok()) {
    std::cerr << "cellar-trigger: invalid trigger definitions:\n"
              << defs.status().message() << "\n";
    return cellar::kUsageExitCode;
  }
  cellar::MetricsRegistry metrics;
  std::unique_ptr<cellar::MetricsEndpoint> endpoint;
  if (int code = 0; !cellar::StartMetricsEndpointForMain(&metrics, metrics_address,
                                                         "cellar-trigger", &endpoint, &code))
    return code;
  opts.metrics = &metrics;
  cellar::TriggerWorker worker(*config, opts);
  for (const auto& d : *defs)
    if (only.empty() || std::find(only.begin(), only.end(), d.name) != only.end()) {
      if (cellar::Status s = worker.on_webhook(d); !s.ok()) {
        std::cerr << "cellar-trigger: " << s.ToString() << "\n";
        return cellar::kUsageExitCode;
      }
    }
  return worker.run();
}
