// Shared plumbing of the `cellar` command line: config loading, JSON output,
// one-line errors.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "config/cluster_config.h"

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

// The transform every whole-number option of `cellar` carries (T: the
// option's integer type): the text must be a decimal number, an optional '-'
// and digits only, that fits T; CLI11 then gets it back in canonical form.
// CLI11 2.1 converts with strtoll/strtoull in base 0 and keeps what they give,
// so without it `--ref 010` wrote ref_key 8, `0x20` 32, an out-of-range
// value the type's limit and `--after -1` read from 2^64-1. On failure the
// command ends before it runs, with "<option>: '<text>' is not a whole number
// from <min> to <max>" and the usage-error exit code (2).
template <typename T>
CLI::Validator DecimalInteger() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        // from_chars takes no '+', no space and no 0x: what is left is plain decimal.
        auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc() && ptr == end && !text.empty()) {
          text = std::to_string(value);
          return "";
        }
        return "'" + text + "' is not a whole number from " +
               std::to_string(std::numeric_limits<T>::min()) + " to " +
               std::to_string(std::numeric_limits<T>::max());
      },
      "");
}

// Registers the cell commands (init put get latest row versions log erase purge shards).
void AddCellCommands(CLI::App& app, const GlobalOptions& g);
// Registers `log tail` (REQUIRES: AddCellCommands first) and `relay status`.
void AddChangeLogCommands(CLI::App& app, const GlobalOptions& g);
// Registers `trigger status | replay | dlq list | dlq retry`.
void AddTriggerCommands(CLI::App& app, const GlobalOptions& g);
// Registers `migrate` and `shards move` (REQUIRES: AddCellCommands first).
void AddLayoutCommands(CLI::App& app, const GlobalOptions& g);
// Registers `index apply | query | backfill | check | status | drop-retired`.
void AddIndexCommands(CLI::App& app, const GlobalOptions& g);

// Registers `status` (status/cluster_status.h).
void AddStatusCommand(CLI::App& app, const GlobalOptions& g);

}  // namespace cellar::cli
