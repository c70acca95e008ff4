#include "tests/http_test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace cellar::testing {
namespace {

std::atomic<int> g_counter{0};

// A sanitizer report in the child's log fails the running test.
void CheckLogForSanitizerReports(const std::string& log_path) {
  std::ifstream in(log_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string log = ss.str();
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"})
    if (log.find(marker) != std::string::npos) {
      ADD_FAILURE() << "cellard (" << log_path << ") reported: " << marker << "\n"
                    << log.substr(log.find(marker) >= 2000 ? log.find(marker) - 2000 : 0, 8000);
      return;
    }
}

}  // namespace

std::unique_ptr<CellardProcess> CellardProcess::Start(const std::string& config_path,
                                                      const std::vector<std::string>& extra,
                                                      const std::string& listen) {
  static TempDir dir_holder("cellard");  // removed at exit with the logs
  TempDir* dir = &dir_holder;
  const int n = ++g_counter;
  const std::string ready = dir->File("ready-" + std::to_string(n));
  std::unique_ptr<CellardProcess> p(new CellardProcess());
  p->log_path_ = dir->File("cellard-" + std::to_string(n) + ".log");
  for (size_t i = 0; i < extra.size(); ++i)
    if (extra[i] == "--tls-cert") p->scheme_ = "https";

  // Everything the child needs is prepared before fork().
  std::vector<std::string> args = {CELLARD_BIN, "--config",     config_path, "--listen",
                                   listen,      "--ready-file", ready};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(p->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) {
    std::cerr << "fork failed\n";
    return nullptr;
  }
  p->pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(ready);
    std::string line;
    if (in && std::getline(in, line)) {
      const size_t colon = line.rfind(':');
      if (colon != std::string::npos) {
        p->port_ = std::stoi(line.substr(colon + 1));
        return p;
      }
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      p->pid_ = -1;
      std::ifstream log(p->log_path_);
      std::cerr << "cellard exited before listening; its log:\n" << log.rdbuf() << "\n";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cerr << "cellard did not listen within 30 s\n";
  return nullptr;
}

CellardProcess::~CellardProcess() { Kill(); }

void CellardProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  CheckLogForSanitizerReports(log_path_);
}

int CellardProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 3000; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      CheckLogForSanitizerReports(log_path_);
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return -1;
}

}  // namespace cellar::testing
