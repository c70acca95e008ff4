// What the command-line tests of status_test share (status_test.cc, the
// operator commands; cli_bad_input_test.cc, refused options): the two private
// MariaDB servers and the local broker of the binary, and running a program
// to completion with its stdout and stderr apart.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/cluster_environment.h"
#include "testing/private_mariadb.h"

namespace cellar {

// The binary's servers ("stat1", "stat2") and broker, registered with gtest
// once; started before the first test.
testing::ClusterEnvironment& CliEnv();
std::vector<const testing::PrivateMariaDb*> CliServers();

struct CliResult {
  int code = -1;
  std::string out, err;
  nlohmann::json json;  // stdout parsed (discarded when it is not JSON)
};

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// Runs `program args...` to completion (stdout and stderr kept apart through
// the shell: ChildProcess writes both to one log). A test failure when it does
// not end within 90 s.
CliResult RunProgram(const std::string& program, const std::vector<std::string>& args);

// Runs `cellar --config <config> args...` to completion.
CliResult RunCli(const std::string& config, const std::vector<std::string>& args);

}  // namespace cellar
