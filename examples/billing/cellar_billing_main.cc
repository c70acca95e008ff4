// cellar-billing: the Mezzanine example as a C++ trigger service.
//   BASE written  -> trigger "billing" bills the trip and writes its STATUS cell
//                    at the same ref_key (deterministic address: a re-run is an
//                    identical, idempotent put).
//   STATUS written -> trigger "status_audit" logs the state change.
//   cellar-billing --config cellar.yaml [--metrics-address 127.0.0.1:9465]
//                  [--replay billing --from beginning]   (backfill from the cell tables, then exit)
#include <CLI/CLI.hpp>
#include <iostream>

#include "base/log.h"
#include "base/signal_wait.h"
#include "config/command_line.h"
#include "config/config_for_main.h"
#include "server/metrics_endpoint.h"
#include "triggers/trigger_worker.h"

namespace {

// [readme: handler]
cellar::Status Bill(const cellar::CellEvent& e, cellar::TriggerContext& ctx) {
  // An erased trip (tombstone, body null) is not billed: its STATUS stays as
  // it was. Triggers deliver erases by default.
  if (e.cell.tombstone) return cellar::Status::Ok();
  const nlohmann::json& trip = e.cell.body;
  double total = 0;
  if (trip.contains("fare") && trip["fare"].is_object() && trip["fare"].contains("total") &&
      trip["fare"]["total"].is_number())
    total = trip["fare"]["total"].get<double>();
  // A trip with nothing to charge is closed as "free" (no payment webhook).
  nlohmann::json status = {{"state", total > 0 ? "billed" : "free"},
                           {"amount", total},
                           {"billed_ref_key", e.cell.ref_key},
                           {"trigger", ctx.trigger()}};
  auto r = ctx.store().Put(e.datastore,
                           cellar::CellWrite{e.cell.row_key, "STATUS", e.cell.ref_key, status});
  return r.status();
}
// [end]

}  // namespace

int main(int argc, char** argv) {
  // Before any thread: the metrics endpoint's threads inherit the blocked
  // signals, so SIGTERM reaches run()'s wait.
  cellar::BlockTerminationSignals();
  CLI::App app{"cellar-billing: bills trips when their BASE cell is written"};
  std::string config_path = "cellar.yaml", metrics_address, replay, from = "beginning";
  app.add_option("--config", config_path, "cluster config (YAML)")->capture_default_str();
  app.add_option("--metrics-address", metrics_address, "host:port serving /metrics");
  app.add_option("--replay", replay, "replay this trigger from the cell tables, then exit");
  app.add_option("--from", from, "replay start: beginning | RFC 3339 time | shard:added_id,...");
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  auto config = cellar::LoadClusterConfigForMain(config_path, "cellar-billing");
  if (!config) return cellar::kUsageExitCode;
  cellar::TriggerWorkerOptions opts;
  cellar::MetricsRegistry metrics;
  std::unique_ptr<cellar::MetricsEndpoint> endpoint;
  if (int code = 0; !cellar::StartMetricsEndpointForMain(&metrics, metrics_address,
                                                         "cellar-billing", &endpoint, &code))
    return code;
  opts.metrics = &metrics;
  opts.client_id = "cellar-billing";
  cellar::TriggerWorker w(*config, opts);
  cellar::Status registered = w.on("trips", "BASE", "billing", Bill);
  if (registered.ok())
    registered = w.on("trips", "STATUS", "status_audit",
                      [](const cellar::CellEvent& e, cellar::TriggerContext&) {
                        if (e.cell.tombstone) return cellar::Status::Ok();  // no state to log
                        cellar::LogInfo("status_audit", "trip status",
                                        {{"row", e.cell.row_key.ToString()},
                                         {"ref_key", std::to_string(e.cell.ref_key)},
                                         {"state", e.cell.body.value("state", "")}});
                        return cellar::Status::Ok();
                      });
  if (!registered.ok()) {
    std::cerr << "cellar-billing: " << registered.ToString() << "\n";
    return cellar::kUsageExitCode;
  }
  if (!replay.empty()) {
    auto f = cellar::ParseReplayFrom(from);
    if (!f.ok()) {
      std::cerr << "cellar-billing: " << f.status().ToString() << "\n";
      return cellar::kUsageExitCode;
    }
    cellar::Status s = w.Replay(replay, *f);
    if (!s.ok()) {
      std::cerr << "cellar-billing: " << s.ToString() << "\n";
      return 1;
    }
    return 0;
  }
  return w.run();
}
