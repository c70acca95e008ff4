// The command-line parse every Cellar program shares, so that all of them
// answer a bad option the same way: CLI11's message on stderr and exit code 2
// (usage), as `cellar` always did. CLI11_PARSE would end with CLI11's own
// codes instead (105 for a refused value, 109 for an extra argument, ...).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

namespace cellar {

// The exit code for "bad usage or config", shared by every program.
inline constexpr int kUsageExitCode = 2;

// Parses argv into `app`.
// Returns nullopt when the program should go on. Otherwise the program should
// return the value at once: 0 after --help (printed on stdout), the code of a
// CLI::RuntimeError a callback raised, or kUsageExitCode for any other parse
// error (its message printed on stderr).
// REQUIRES: called once, from main's thread.
[[nodiscard]] std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace cellar
