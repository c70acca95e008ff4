#include "workers/cli/cli_common.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "config/config_for_main.h"

namespace cellar::cli {

ClusterConfig LoadConfigOrExit(const GlobalOptions& g) {
  auto cfg = LoadClusterConfigForMain(g.config_path, "cellar");
  if (!cfg) std::exit(2);
  return std::move(*cfg);
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

void OrFail(const Status& status) {
  if (!status.ok()) throw CLI::RuntimeError(Fail(status));
}

void AddReadOption(CLI::App* command, ReadPreference* read, const std::string& help) {
  static constexpr ReadPreference kAll[] = {ReadPreference::kPrimary, ReadPreference::kReplica};
  std::vector<std::string> names;
  for (ReadPreference p : kAll) names.push_back(ReadPreferenceName(p));
  command
      ->add_option_function<std::string>(
          "--read",
          [read](const std::string& name) {
            for (ReadPreference p : kAll)
              if (name == ReadPreferenceName(p)) *read = p;
          },
          help)
      ->check(CLI::IsMember(names));
}

}  // namespace cellar::cli
