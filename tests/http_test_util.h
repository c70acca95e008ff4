// Helpers of the HTTP worker-node tests: a cellard child process on a free
// loopback port, and a shared private-MariaDB cluster environment.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"

namespace cellar::testing {

// A `cellard --config <config> --listen 127.0.0.1:0 --ready-file F <extra...>`
// child (binary from the CELLARD_BIN compile definition). Start() waits until
// it listens (up to 30 s) and returns null on failure after printing why. The
// child dies with the starting thread (PR_SET_PDEATHSIG) and is killed by the
// destructor. Its stderr goes to <dir>/cellard-<n>.log (removed at exit); a
// sanitizer report found there when the child is stopped or killed fails the
// running test. `listen` replaces 127.0.0.1:0, e.g. to restart a node on the
// port it had (url() unchanged for clients).
class CellardProcess {
 public:
  static std::unique_ptr<CellardProcess> Start(const std::string& config_path,
                                               const std::vector<std::string>& extra_args = {},
                                               const std::string& listen = "127.0.0.1:0");
  ~CellardProcess();

  int port() const { return port_; }
  std::string url() const { return scheme_ + "://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // SIGKILL and reap (a crash). No-op when not running.
  void Kill();
  // SIGTERM and wait for exit (up to 30 s, then SIGKILL); returns the exit status
  // (as from waitpid), or -1 when it was not running.
  int Stop();

 private:
  CellardProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string scheme_ = "http";
  std::string log_path_;
};

}  // namespace cellar::testing
