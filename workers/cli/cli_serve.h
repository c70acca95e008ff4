// `cellar serve`: runs the HTTP worker node in the foreground (the same as the
// cellard binary; flags in server/serve_command.h).
#pragma once

#include <CLI/CLI.hpp>

#include "workers/cli/cli_common.h"

namespace cellar::cli {

void AddServeCommand(CLI::App& app, const GlobalOptions& g);

}  // namespace cellar::cli
