#include "config/command_line.h"

namespace cellar {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kUsageExitCode;
  }
  return std::nullopt;
}

}  // namespace cellar
