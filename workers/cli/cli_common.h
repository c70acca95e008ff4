// Shared plumbing of the `cellar` command line: config loading, JSON output,
// one-line errors.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "cells/cell.h"
#include "config/cluster_config.h"
#include "config/number_options.h"

namespace cellar::cli {

struct GlobalOptions {
  std::string config_path = "cellar.yaml";
};

// Loads the config; on failure prints every error and exits 2.
ClusterConfig LoadConfigOrExit(const GlobalOptions& g);

// Prints `j` (pretty when stdout is a terminal) and a newline.
void PrintJson(const nlohmann::json& j);

// Prints "cellar: <Code>: <message>" to stderr and returns the exit code 1.
int Fail(const Status& status);

// A command's error exit: on an error prints it (Fail) and ends the command
// with exit code 1 by throwing CLI::RuntimeError, which cellar's main turns
// into the exit code. OrFail(result) returns the value otherwise.
void OrFail(const Status& status);
template <typename T>
T OrFail(Result<T> result) {
  OrFail(result.status());
  return std::move(result).value();
}

// `--read primary|replica` on `command` (ReadPreference, cells/cell.h), into
// `*read`, which keeps its value when the option is not given. Another value
// is a usage error naming both.
void AddReadOption(CLI::App* command, ReadPreference* read, const std::string& help);

// Registers the cell commands (init put get latest row versions log erase purge shards).
void AddCellCommands(CLI::App& app, const GlobalOptions& g);
// Registers `log tail` (REQUIRES: AddCellCommands first) and `relay status`.
void AddChangeLogCommands(CLI::App& app, const GlobalOptions& g);
// Registers `trigger status | replay | dlq list | dlq retry`.
void AddTriggerCommands(CLI::App& app, const GlobalOptions& g);
// Registers `migrate` and `shards move` (REQUIRES: AddCellCommands first).
void AddLayoutCommands(CLI::App& app, const GlobalOptions& g);
// Registers `host failover`.
void AddHostCommands(CLI::App& app, const GlobalOptions& g);
// Registers `index apply | query | backfill | check | status | drop-retired`.
void AddIndexCommands(CLI::App& app, const GlobalOptions& g);

// Registers `status` (status/cluster_status.h).
void AddStatusCommand(CLI::App& app, const GlobalOptions& g);

}  // namespace cellar::cli
