#include "tests/cli_test_util.h"

#include <chrono>
#include <cstdio>

#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"

namespace cellar {

testing::ClusterEnvironment& CliEnv() {
  static testing::ClusterEnvironment* const env = testing::ClusterEnvironment::Register(
      {.servers = {"stat1", "stat2"}, .broker = true, .relaxed_durability = true});
  return *env;
}

std::vector<const testing::PrivateMariaDb*> CliServers() {
  return {&CliEnv().db(0), &CliEnv().db(1)};
}

std::string ReadFile(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

CliResult RunProgram(const std::string& program, const std::vector<std::string>& args) {
  static int n = 0;
  testing::TempDir dir("cli");
  const std::string out = dir.File("out"), err = dir.File("err");
  std::string cmd = "exec '" + program + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >'" + out + "' 2>'" + err + "'";
  testing::ChildProcess p({"/bin/sh", "-c", cmd}, dir.File("log" + std::to_string(++n)));
  CliResult r;
  EXPECT_TRUE(p.running());
  EXPECT_TRUE(testing::WaitFor([&] { return p.Exited(); }, std::chrono::seconds(90))) << cmd;
  r.code = p.exit_code();
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  r.json = nlohmann::json::parse(r.out, nullptr, false);
  return r;
}

CliResult RunCli(const std::string& config, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--config", config};
  all.insert(all.end(), args.begin(), args.end());
  return RunProgram(CELLAR_BIN, all);
}

}  // namespace cellar
