// Helpers of the config tests (config_test.cc, config_errors_test.cc): YAML
// snippets and the file:line error lines a failed parse reports.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"

namespace cellar::config_test {

// 1-based line of the first line of `yaml` containing `needle`; fails the test when absent.
inline int LineOf(const std::string& yaml, const std::string& needle) {
  std::istringstream in(yaml);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  ADD_FAILURE() << "'" << needle << "' not in the test YAML:\n" << yaml;
  return -1;
}

// "cellar.yaml:<line of needle>: <rest>"
inline std::string At(const std::string& yaml, const std::string& needle, const std::string& rest) {
  return "cellar.yaml:" + std::to_string(LineOf(yaml, needle)) + ": " + rest;
}

// The error lines of a failed parse (empty and a test failure when it succeeded).
inline std::vector<std::string> Errors(const std::string& yaml) {
  Result<ClusterConfig> r = ParseClusterConfig(yaml, "cellar.yaml");
  if (r.ok()) {
    ADD_FAILURE() << "config was accepted:\n" << yaml;
    return {};
  }
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << r.status().ToString();
  std::vector<std::string> lines;
  std::istringstream in(r.status().message());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// A small valid cluster: two hosts over 64 shards and one datastore. `hosts`
// and `datastores` replace the respective sections when given.
inline std::string Yaml(const std::string& hosts = "", const std::string& datastores = "",
                        const std::string& extra = "") {
  std::string y =
      "shards: 64\n"
      "mysql:\n"
      "  user: root\n"
      "  hosts:\n";
  y += hosts.empty() ? "    - { name: db1, address: 127.0.0.1, port: 3306, shards: 0-31 }\n"
                       "    - { name: db2, address: 127.0.0.1, port: 3307, shards: 32-63 }\n"
                     : hosts;
  y += extra;
  y += "datastores:\n";
  y += datastores.empty() ? "  - name: trips\n"
                            "    columns:\n"
                            "      BASE: {}\n"
                            "      STATUS: { ttl: 30d }\n"
                          : datastores;
  return y;
}

}  // namespace cellar::config_test
