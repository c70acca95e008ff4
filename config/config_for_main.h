// LoadClusterConfigForMain: the config loading every Cellar program's main
// does first, with the one error report they all give.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/cluster_config.h"

namespace cellar {

// LoadClusterConfig(path). On failure prints "<program>: invalid config:"
// and every error (one per line, with file, line and key path) to stderr and
// returns nullopt; the caller exits 2 (bad usage or config).
std::optional<ClusterConfig> LoadClusterConfigForMain(const std::string& path,
                                                      std::string_view program);

}  // namespace cellar
