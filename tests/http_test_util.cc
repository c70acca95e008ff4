#include "tests/http_test_util.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gtest/gtest.h"
#include "testing/wait_for.h"

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

  std::vector<std::string> args = {CELLARD_BIN, "--config",     config_path, "--listen",
                                   listen,      "--ready-file", ready};
  args.insert(args.end(), extra.begin(), extra.end());
  p->child_ = std::make_unique<ChildProcess>(args, p->log_path_);
  if (!p->child_->running()) return nullptr;  // ChildProcess said why

  // The ready file holds "host:port" once cellard listens.
  bool exited = false;
  const bool listening = WaitFor(
      [&] {
        std::ifstream in(ready);
        std::string line;
        if (in && std::getline(in, line)) {
          const size_t colon = line.rfind(':');
          if (colon != std::string::npos) {
            p->port_ = std::stoi(line.substr(colon + 1));
            return true;
          }
        }
        exited = p->child_->Exited();
        return exited;
      },
      std::chrono::seconds(30));
  if (listening && !exited) return p;
  if (exited) {
    std::cerr << "cellard exited before listening; its log:\n" << p->child_->Log() << "\n";
  } else {
    std::cerr << "cellard did not listen within 30 s\n";
  }
  return nullptr;
}

CellardProcess::~CellardProcess() { Kill(); }

void CellardProcess::Kill() {
  if (!child_ || !child_->running()) return;
  child_->Kill();
  CheckLogForSanitizerReports(log_path_);
}

int CellardProcess::Stop() {
  if (!child_ || !child_->running()) return -1;
  const int code = child_->Terminate(std::chrono::seconds(30));
  CheckLogForSanitizerReports(log_path_);
  return code;
}

}  // namespace cellar::testing
