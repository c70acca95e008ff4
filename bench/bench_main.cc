// `cellar-bench`: benchmark programs (not timed tests). Each subcommand starts
// its own private MariaDB unless --config names a running cluster, prints a
// readable table of figures and ends with one line of JSON (bench_common.h).
//
// Exit codes: 0 done, 1 the benchmark failed (an operation returned an error),
// 2 bad usage or config, 130 interrupted.
#include <CLI/CLI.hpp>

#include "bench/bench_common.h"
#include "config/command_line.h"

namespace cellar::bench {
// Registered like AddPutCommand (bench_common.h); defined in bench_<name>.cc.
void AddRelayCommand(CLI::App& app, int* exit_code);
void AddTriggerCommand(CLI::App& app, int* exit_code);
void AddIndexCommand(CLI::App& app, int* exit_code);
// Registers `pipeline`: the whole write path under stepped load (bench_pipeline.cc).
void AddPipelineCommand(CLI::App& app, int* exit_code);
// Registers `failover`: semi-sync puts and failovers under load (bench_failover.cc).
void AddFailoverCommand(CLI::App& app, int* exit_code);
// Registers `all`: runs the others as child processes, writes BENCHMARKS.md (bench_all.cc).
void AddAllCommand(CLI::App& app, int* exit_code);
}  // namespace cellar::bench

int main(int argc, char** argv) {
  // First, before any thread exists: every thread inherits the blocked mask.
  cellar::bench::InstallStopSignals();
  CLI::App app{"cellar-bench: Cellar benchmarks"};
  app.require_subcommand(1);
  int exit_code = 0;
  cellar::bench::AddPutCommand(app, &exit_code);
  cellar::bench::AddHttpCommand(app, &exit_code);
  cellar::bench::AddRelayCommand(app, &exit_code);
  cellar::bench::AddTriggerCommand(app, &exit_code);
  cellar::bench::AddIndexCommand(app, &exit_code);
  cellar::bench::AddPipelineCommand(app, &exit_code);
  cellar::bench::AddFailoverCommand(app, &exit_code);
  cellar::bench::AddAllCommand(app, &exit_code);
  if (auto parse_exit = cellar::ParseCommandLine(app, argc, argv)) return *parse_exit;
  return exit_code;
}
