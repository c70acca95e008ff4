#include "workers/cli/cli_serve.h"

#include <memory>

#include "server/serve_command.h"

namespace cellar::cli {

void AddServeCommand(CLI::App& app, const GlobalOptions& g) {
  auto flags = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "run the HTTP worker node (like cellard)");
  AddServeFlags(cmd, flags.get());
  cmd->callback([flags, &g] {
    int rc = RunServe(LoadConfigOrExit(g), *flags);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace cellar::cli
