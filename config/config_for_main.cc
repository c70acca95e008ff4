#include "config/config_for_main.h"

#include <iostream>

namespace cellar {

std::optional<ClusterConfig> LoadClusterConfigForMain(const std::string& path,
                                                      std::string_view program) {
  auto config = LoadClusterConfig(path);
  if (!config.ok()) {
    std::cerr << program << ": invalid config:\n" << config.status().message() << "\n";
    return std::nullopt;
  }
  return std::move(config).value();
}

}  // namespace cellar
