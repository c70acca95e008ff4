// Helpers of the HTTP worker-node tests: a cellard child process on a free
// loopback port, and a shared private-MariaDB cluster environment.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "testing/child_process.h"
#include "testing/private_mariadb.h"
#include "testing/test_cluster.h"

namespace cellar::testing {

// A `cellard --config <config> --listen 127.0.0.1:0 --ready-file F <extra...>`
// child (binary from the CELLARD_BIN compile definition), run by a
// ChildProcess (testing/child_process.h: it dies with the starting thread,
// gets CELLAR_LOG_LEVEL=info and no inherited descriptors, and is killed by
// the destructor). Start() waits until it listens (up to 30 s) and returns
// null on failure after printing why. Its stdout and stderr go to
// <dir>/cellard-<n>.log (removed at exit); a sanitizer report found there when
// the child is stopped or killed fails the running test. `listen` replaces
// 127.0.0.1:0, e.g. to restart a node on the port it had (url() unchanged for
// clients).
class CellardProcess {
 public:
  static std::unique_ptr<CellardProcess> Start(const std::string& config_path,
                                               const std::vector<std::string>& extra_args = {},
                                               const std::string& listen = "127.0.0.1:0");
  ~CellardProcess();

  int port() const { return port_; }
  std::string url() const { return scheme_ + "://127.0.0.1:" + std::to_string(port_); }
  // The child's pid; -1 once it was stopped or killed.
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  const std::string& log_path() const { return log_path_; }

  // SIGKILL and reap (a crash). No-op when not running.
  void Kill();
  // SIGTERM and wait for exit (up to 30 s, then SIGKILL); returns its exit
  // code (0: a clean stop), or -1 when it was killed, died from a signal or
  // was not running.
  int Stop();

 private:
  CellardProcess() = default;
  std::unique_ptr<ChildProcess> child_;
  int port_ = 0;
  std::string scheme_ = "http";
  std::string log_path_;
};

}  // namespace cellar::testing
