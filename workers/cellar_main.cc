// `cellar`: the command line. Subcommands print JSON on stdout; any error is
// one line on stderr and a non-zero exit (1 for a failed operation, 2 for bad
// usage or config).
#include <CLI/CLI.hpp>

#include "config/command_line.h"
#include "workers/cli/cli_common.h"
#include "workers/cli/cli_serve.h"

int main(int argc, char** argv) {
  CLI::App app{"cellar: versioned JSON cells on sharded MySQL"};
  app.require_subcommand(1);
  cellar::cli::GlobalOptions g;
  app.add_option("--config", g.config_path, "cluster config (YAML)")->capture_default_str();
  cellar::cli::AddCellCommands(app, g);
  cellar::cli::AddChangeLogCommands(app, g);
  cellar::cli::AddLayoutCommands(app, g);
  cellar::cli::AddHostCommands(app, g);
  cellar::cli::AddTriggerCommands(app, g);
  cellar::cli::AddServeCommand(app, g);
  cellar::cli::AddIndexCommands(app, g);
  cellar::cli::AddStatusCommand(app, g);
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;
  return 0;
}
