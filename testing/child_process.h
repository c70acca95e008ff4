// ChildProcess: a test's child process (a Cellar binary) with stdout and
// stderr appended to a log file.
//
// The child gets PR_SET_PDEATHSIG=SIGKILL, so it dies with the *thread* that
// constructed it: construct from a thread that outlives it (the test's main
// thread). The destructor SIGKILLs and reaps it if it still runs. The child
// inherits the environment with CELLAR_LOG_LEVEL=info and no file
// descriptors beyond stdin/stdout/stderr.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cellar::testing {

class ChildProcess {
 public:
  // args[0] is the binary's path. On failure (log not writable, fork failed)
  // prints why on stderr and running() is false.
  ChildProcess(const std::vector<std::string>& args, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // True once the process exited on its own (reaps it).
  bool Exited();
  // The exit code after Exited()/Terminate(); -1 when killed by a signal.
  int exit_code() const { return exit_code_; }
  void Kill();  // SIGKILL + waitpid
  // SIGTERM, waits up to `timeout` for exit (then SIGKILL). Returns the exit
  // code, or -1 when it had to be killed or died from a signal.
  int Terminate(std::chrono::milliseconds timeout);
  // The log's last ~20 kB.
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string log_path_;
};

// The lines of the log file at `path` at level warn or error (Cellar's
// structured log: "level=warn" / "level=error"), the whole file rather than
// ChildProcess::Log()'s tail; "(none)\n" when there are none.
std::string WarningLinesOf(const std::string& path);

// Runs `args` (args[0] is the binary's path) as a ChildProcess logging to
// `log_path` until it exits, at most `timeout`. `exit_code` is its exit code;
// -1 when it could not start or died from a signal; kRunTimedOut when it was
// still running at the deadline (it is killed then). `log` is the log's tail
// (ChildProcess::Log()). `report` is the last line of that tail that parses
// as a JSON object (a CLI's or a tool's final report), null when none does.
constexpr int kRunTimedOut = -2;
struct RunResult {
  int exit_code = -1;
  std::string log;
  nlohmann::json report;
};
RunResult RunToExit(const std::vector<std::string>& args, const std::string& log_path,
                    std::chrono::milliseconds timeout);

// Runs a command (args[0] searched in PATH) to completion with stdin from
// /dev/null, capturing stdout and stderr separately (the child inherits the
// environment and dies with the calling thread). Returns the wait status
// (waitpid), or -1 if it could not be started. No timeout: for commands that end.
int RunCaptured(const std::vector<std::string>& args, std::string* out, std::string* err);

}  // namespace cellar::testing
