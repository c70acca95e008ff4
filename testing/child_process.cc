#include "testing/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>

#include "testing/wait_for.h"

namespace cellar::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& args, const std::string& log_path)
    : log_path_(log_path) {
  // Everything the child needs is prepared before fork(): after it, the child
  // only makes system calls (this process has many threads).
  std::vector<std::string> argv_strings = args;
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view(*e).substr(0, 17) != "CELLAR_LOG_LEVEL=") env_strings.emplace_back(*e);
  env_strings.emplace_back("CELLAR_LOG_LEVEL=info");
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::cerr << "ChildProcess: cannot open " << log_path << ": " << std::strerror(errno) << "\n";
    return;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    if (::getppid() != parent) ::_exit(126);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close_range(3, ~0u, 0);  // no inherited MySQL or Kafka sockets of the test
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  if (pid < 0) {
    std::cerr << "ChildProcess: fork failed: " << std::strerror(errno) << "\n";
    return;
  }
  pid_ = pid;
}

ChildProcess::~ChildProcess() { Kill(); }

bool ChildProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  pid_ = -1;
  return true;
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  exit_code_ = -1;
}

int ChildProcess::Terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return exit_code_;
  ::kill(pid_, SIGTERM);
  if (WaitFor([&] { return Exited(); }, timeout)) return exit_code_;
  Kill();
  return -1;
}

RunResult RunToExit(const std::vector<std::string>& args, const std::string& log_path,
                    std::chrono::milliseconds timeout) {
  ChildProcess p(args, log_path);
  RunResult r;
  if (p.running()) {
    if (WaitFor([&] { return p.Exited(); }, timeout)) {
      r.exit_code = p.exit_code();
    } else {
      p.Kill();
      r.exit_code = kRunTimedOut;
    }
  }
  r.log = p.Log();
  std::istringstream lines(r.log);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] == '{')
      if (auto j = nlohmann::json::parse(line, nullptr, false); j.is_object())
        r.report = std::move(j);
  return r;
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  constexpr size_t kMax = 20000;  // the tail is what explains a failure
  return s.size() > kMax ? "...\n" + s.substr(s.size() - kMax) : s;
}

std::string WarningLinesOf(const std::string& path) {
  std::ifstream in(path);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("level=warn") != std::string::npos ||
        line.find("level=error") != std::string::npos)
      out += line + "\n";
  return out.empty() ? "(none)\n" : out;
}

}  // namespace cellar::testing
