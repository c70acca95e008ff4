// Runs one benchmark of `cellar-bench all` as a child process: its stdout is
// forwarded live to ours and captured; SIGTERM reaches it once StopRequested().
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace cellar::bench {

struct ChildExit {
  std::string stdout_text;  // everything the child wrote on stdout
  int exit_code = -1;       // valid when signal == 0
  int signal = 0;           // the signal that killed it, or 0
  bool sent_sigterm = false;
};

// Starts `argv` (argv[0] a path) in its own process group with SIGTERM when
// this thread dies, forwards and captures its stdout until it exited, and
// reaps it. Internal when it cannot be started.
// REQUIRES: called from the thread that lives as long as the child (main).
Result<ChildExit> RunChild(const std::vector<std::string>& argv);

}  // namespace cellar::bench
