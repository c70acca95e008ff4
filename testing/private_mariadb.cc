#include "testing/private_mariadb.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <vector>

#include "testing/child_process.h"
#include "testing/free_port.h"

namespace cellar::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kReadyTimeout = std::chrono::seconds(30);
constexpr auto kStopTimeout = std::chrono::seconds(30);
constexpr auto kPollInterval = std::chrono::milliseconds(10);
constexpr int kPortAttempts = 5;
constexpr const char* kServerBinary = "/usr/sbin/mariadbd";
// mariadbd's error log line when --port is taken (errno 98 is EADDRINUSE).
constexpr const char* kBindError = "Can't start server: Bind on TCP/IP port";
constexpr const char* kReady = "ready for connections";

// Forks and execs args[0] (searched in PATH). The child gets stdin from
// /dev/null, stdout on `out_fd` and stderr on `err_fd`, no other inherited
// descriptors, its own process group, and SIGKILL when the calling thread dies.
// Returns the child's pid, or -1 with errno set.
pid_t Spawn(const std::vector<std::string>& args, int out_fd, int err_fd) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return -1;
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    setpgid(0, 0);  // terminal signals (Ctrl-C) go to the test, not the server
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    close_range(3, ~0U, 0);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int saved = errno;
  close(null_fd);
  errno = saved;
  return pid;
}

// Waits until `pid` exits or `timeout` passes. Returns true and sets *status when it exited.
bool WaitFor(pid_t pid, Clock::duration timeout, int* status) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs a command to completion, with stdout and stderr appended to `log_path`.
// Returns the wait status, or -1 if it could not be started.
int RunLogged(const std::vector<std::string>& args, const std::string& log_path) {
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  pid_t pid = Spawn(args, fd, fd);
  close(fd);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

// Declared in child_process.h; here beside Spawn, which it shares with the server start.
int RunCaptured(const std::vector<std::string>& args, std::string* out, std::string* err) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return -1;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return -1;
  }
  pid_t pid = Spawn(args, out_pipe[1], err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_fds = pid < 0 ? 0 : 2;
  char buf[8192];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll ignores negative fds
        --open_fds;
      }
    }
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  if (pid < 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

namespace {

bool TcpConnects(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

std::string ReadTail(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  if (!in) return "(no " + path + ")";
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// The lines of a log that mention an error (the tail is often just advice).
std::string ReadErrors(const std::string& path) {
  std::ifstream in(path);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("ERROR") != std::string::npos) out += line + "\n";
  }
  return out;
}

bool IsRoot() { return geteuid() == 0; }

}  // namespace

std::unique_ptr<PrivateMariaDb> PrivateMariaDb::Start(const std::string& label,
                                                      PrivateMariaDbOptions options) {
  std::unique_ptr<PrivateMariaDb> db(new PrivateMariaDb());
  db->label_ = label;
  db->options_ = std::move(options);
  std::string safe_label;
  for (char c : label) safe_label += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/cellar-" + safe_label + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + pattern + ": " + strerror(errno));
  // Canonical, so that it compares equal to the server's @@datadir.
  db->dir_ = std::filesystem::canonical(pattern).string();

  // A private tmpdir: concurrent installs sharing /tmp fail at random
  // ("Unknown table 'mysql.tmp_user_sys'"), their temp tables collide.
  std::filesystem::create_directory(db->dir_ + "/tmp");
  std::vector<std::string> install = {
      "mariadb-install-db", "--no-defaults", "--datadir=" + db->dir_ + "/data",
      "--tmpdir=" + db->dir_ + "/tmp", "--auth-root-authentication-method=normal", "--skip-test-db",
      // Skips a hostname lookup that costs ~1 s.
      "--skip-name-resolve",
      // Passed through to the bootstrap mariadbd: creates the redo log at its final size.
      "--innodb-log-file-size=" + db->options_.innodb_log_file_size};
  if (IsRoot()) install.push_back("--user=root");
  const std::string install_log = db->dir_ + "/install.log";
  int status = RunLogged(install, install_log);
  if (status != 0) {
    throw std::runtime_error(label + ": mariadb-install-db failed (" +
                             (status < 0 ? std::string(strerror(errno)) : DescribeExit(status)) +
                             "):\n" + ReadErrors(install_log) + "--- tail of " + install_log +
                             " ---\n" + ReadTail(install_log, 15));
  }

  std::string error;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    db->port_ = FreeLoopbackPort();
    bool port_in_use = false;
    error = db->Launch(&port_in_use);
    if (error.empty()) return db;
    if (!port_in_use) break;
  }
  throw std::runtime_error(label + ": " + error + "\n--- tail of " + db->dir_ + "/error.log ---\n" +
                           db->ErrorLogTail());
}

PrivateMariaDb::~PrivateMariaDb() {
  if (running()) Stop();
  if (dir_.empty()) return;
  if (std::getenv("CELLAR_KEEP_TEST_DIRS") != nullptr) {
    std::cerr << "PrivateMariaDb " << label_ << ": keeping " << dir_ << "\n";
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PrivateMariaDb::Launch(bool* port_in_use) {
  *port_in_use = false;
  const std::string log = dir_ + "/error.log";
  std::vector<std::string> args = {
      kServerBinary,
      "--no-defaults",
      "--datadir=" + dir_ + "/data",
      "--tmpdir=" + dir_ + "/tmp",
      "--port=" + std::to_string(port_),
      "--bind-address=127.0.0.1",
      "--socket=" + dir_ + "/sock",
      "--pid-file=" + dir_ + "/mariadbd.pid",
      "--log-error=" + log,
      "--skip-name-resolve",
      "--max-connections=1000",
      "--character-set-server=utf8mb4",
      "--collation-server=utf8mb4_general_ci",
      "--innodb-buffer-pool-size=" + options_.innodb_buffer_pool_size,
      "--innodb-log-file-size=" + options_.innodb_log_file_size,
      "--innodb-flush-log-at-trx-commit=1",
      "--innodb-autoinc-lock-mode=1",
      "--innodb-buffer-pool-load-at-startup=OFF",
      "--innodb-buffer-pool-dump-at-shutdown=OFF",
  };
  if (IsRoot()) args.push_back("--user=root");
  if (options_.server_id == 0) {
    args.push_back("--skip-log-bin");
  } else {
    for (std::string a :
         {"--log-bin=" + dir_ + "/data/binlog", std::string("--binlog-format=ROW"),
          std::string("--log-slave-updates=ON"), std::string("--gtid-strict-mode=ON"),
          std::string("--read-only=ON"), std::string("--rpl-semi-sync-master-enabled=ON"),
          std::string("--rpl-semi-sync-slave-enabled=ON"),
          std::string("--rpl-semi-sync-master-wait-point=AFTER_SYNC"),
          std::string("--rpl-semi-sync-master-wait-no-slave=OFF"), std::string("--sync-binlog=1")})
      args.push_back(a);
    args.push_back("--server-id=" + std::to_string(options_.server_id));
    args.push_back("--rpl-semi-sync-master-timeout=" +
                   std::to_string(options_.semi_sync_timeout_ms));
    args.push_back("--relay-log=" + dir_ + "/data/relay");
    if (!options_.init_rpl_role.empty())
      args.push_back("--init-rpl-role=" + options_.init_rpl_role);
  }
  if (!options_.ssl_cert.empty()) {
    args.push_back("--ssl-ca=" + options_.ssl_ca);
    args.push_back("--ssl-cert=" + options_.ssl_cert);
    args.push_back("--ssl-key=" + options_.ssl_key);
  }
  if (options_.require_secure_transport) args.push_back("--require-secure-transport=ON");

  int out_fd =
      open((dir_ + "/mariadbd.out").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out_fd < 0) return "cannot open " + dir_ + "/mariadbd.out: " + strerror(errno);
  const auto log_size_before = std::filesystem::exists(log) ? std::filesystem::file_size(log) : 0;
  pid_ = Spawn(args, out_fd, out_fd);
  int spawn_errno = errno;
  close(out_fd);
  if (pid_ < 0) return std::string("fork: ") + strerror(spawn_errno);

  // This run's part of the error log: an old bind error must not count.
  auto fresh_log = [&] {
    std::ifstream in(log);
    in.seekg(static_cast<std::streamoff>(log_size_before));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string expected_datadir = dir_ + "/data/";
  const auto deadline = Clock::now() + kReadyTimeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *port_in_use = fresh_log().find(kBindError) != std::string::npos;
      return "mariadbd on port " + std::to_string(port_) + " exited during startup (" +
             DescribeExit(status) + ")";
    }
    const std::string fresh = fresh_log();
    if (fresh.find(kBindError) != std::string::npos) {
      Kill();  // it would take seconds to exit on its own
      *port_in_use = true;
      return "mariadbd could not bind port " + std::to_string(port_);
    }
    // Probe only once our server says it is ready, then check that it really
    // is ours that answers (the datadir), not a foreign server on the port.
    std::string out, err;
    std::vector<std::string> probe = ClientArgs(2);
    probe.push_back("SELECT @@datadir");
    if (fresh.find(kReady) != std::string::npos && TcpConnects(port_) &&
        RunCaptured(probe, &out, &err) == 0 && out == expected_datadir + "\n") {
      return "";
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  Kill();
  return "mariadbd on port " + std::to_string(port_) + " was not ready after 30 s";
}

std::string PrivateMariaDb::ErrorLogTail() const { return ReadTail(dir_ + "/error.log", 30); }

void PrivateMariaDb::Kill() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void PrivateMariaDb::Stop() {
  if (!running()) return;
  kill(pid_, SIGTERM);
  int status = 0;
  if (WaitFor(pid_, kStopTimeout, &status)) {
    pid_ = -1;
    return;
  }
  std::cerr << "PrivateMariaDb " << label_ << ": no clean shutdown after 30 s, sending SIGKILL\n";
  Kill();
}

void PrivateMariaDb::Restart() {
  Stop();
  bool port_in_use = false;
  std::string error = Launch(&port_in_use);
  if (!error.empty()) {
    throw std::runtime_error(label_ + ": restart failed: " + error + "\n--- tail of " + dir_ +
                             "/error.log ---\n" + ErrorLogTail());
  }
}

std::vector<std::string> PrivateMariaDb::ClientArgs(int connect_timeout_s) const {
  std::vector<std::string> args = {"mariadb",
                                   "--no-defaults",
                                   "--protocol=TCP",
                                   "-h127.0.0.1",
                                   "-P" + std::to_string(port_),
                                   "-uroot",
                                   "--batch",
                                   "--skip-column-names",
                                   "--connect-timeout=" + std::to_string(connect_timeout_s)};
  if (!options_.ssl_cert.empty()) args.push_back("--ssl");
  args.push_back("-e");
  return args;
}

int64_t PrivateMariaDb::GlobalStatus(const std::string& name) const {
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return -1;
  std::string out;
  if (!Execute("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
               " WHERE VARIABLE_NAME = '" +
                   name + "'",
               &out) ||
      out.empty())
    return -1;
  return std::strtoll(out.c_str(), nullptr, 10);
}

bool PrivateMariaDb::Execute(const std::string& sql, std::string* output) const {
  std::string out, err;
  std::vector<std::string> args = ClientArgs(10);
  args.push_back(sql);
  int status = RunCaptured(args, &out, &err);
  if (output != nullptr) *output = std::move(out);
  if (status == 0) return true;
  std::cerr << "PrivateMariaDb " << label_ << ": mariadb client failed ("
            << (status < 0 ? std::string("could not start") : DescribeExit(status))
            << ") for: " << sql << "\n"
            << err;
  return false;
}

}  // namespace cellar::testing
