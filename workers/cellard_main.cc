// cellard: a Cellar worker node. Serves the HTTP API (api/cell_api.h)
// over the cluster in --config until SIGTERM/SIGINT, then stops gracefully.
// Flags: see server/serve_command.h. Also available as `cellar serve`.
#include <CLI/CLI.hpp>
#include <iostream>

#include "config/command_line.h"
#include "config/config_for_main.h"
#include "server/serve_command.h"

int main(int argc, char** argv) {
  CLI::App app{"cellard: the Cellar HTTP worker node"};
  std::string config_path = "cellar.yaml";
  cellar::ServeFlags flags;
  app.add_option("--config", config_path, "cluster config (YAML)")->capture_default_str();
  cellar::AddServeFlags(&app, &flags);
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  auto config = cellar::LoadClusterConfigForMain(config_path, "cellard");
  if (!config) return cellar::kUsageExitCode;
  return cellar::RunServe(*config, flags);
}
