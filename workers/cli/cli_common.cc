#include "workers/cli/cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace cellar::cli {

ClusterConfig LoadConfigOrExit(const GlobalOptions& g) {
  auto cfg = LoadClusterConfig(g.config_path);
  if (!cfg.ok()) {
    std::cerr << "cellar: invalid config:\n" << cfg.status().message() << "\n";
    std::exit(2);
  }
  return std::move(cfg).value();
}

void PrintJson(const nlohmann::json& j) {
  std::cout << (isatty(1) ? j.dump(2)
                          : j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
            << std::endl;
}

int Fail(const Status& status) {
  std::string msg = status.ToString();
  for (char& c : msg)
    if (c == '\n') c = ' ';
  std::cerr << "cellar: " << msg << std::endl;
  return 1;
}

}  // namespace cellar::cli
