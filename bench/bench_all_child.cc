#include "bench/bench_all_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "bench/bench_common.h"

namespace cellar::bench {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;  // read end of the child's stdout pipe
};

// Starts `argv` (argv[0] a path) with stdout on a pipe, in its own process
// group, with an empty signal mask and SIGTERM when this thread dies.
// Call it from the thread that lives as long as the child (the main thread).
Result<Child> SpawnChild(const std::vector<std::string>& argv) {
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe2: " + ErrnoText());
  std::cout.flush();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const std::string error = ErrnoText();
    close(fds[0]);
    close(fds[1]);
    return Internal("fork: " + error);
  }
  if (pid == 0) {
    // Child of a multi-threaded process: only async-signal-safe calls until execv.
    if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(127);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  close(fds[1]);
  setpgid(pid, pid);  // also here, so that no Ctrl-C right after fork reaches it
  return Child{pid, fds[0]};
}

// Reads what is ready on `fd` once: appends it to `captured` and copies it to
// our stdout. False at end of file (or on a read error).
bool ForwardChunk(int fd, std::string& captured) {
  char buf[65536];
  ssize_t got;
  do {
    got = read(fd, buf, sizeof(buf));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) return false;
  captured.append(buf, static_cast<size_t>(got));
  std::cout.write(buf, got);
  std::cout.flush();
  return true;
}

ChildExit ToChildExit(int wait_status, std::string stdout_text, bool sent_sigterm) {
  ChildExit e;
  e.stdout_text = std::move(stdout_text);
  e.sent_sigterm = sent_sigterm;
  if (WIFSIGNALED(wait_status)) e.signal = WTERMSIG(wait_status);
  if (WIFEXITED(wait_status)) e.exit_code = WEXITSTATUS(wait_status);
  return e;
}

// Forwards the child's stdout until it has exited and its pipe is drained (a
// grandchild holding the pipe open does not keep us waiting), then reaps it.
// On StopRequested() sends the child SIGTERM, once.
ChildExit ForwardUntilExit(const Child& child) {
  std::string captured;
  bool sent_sigterm = false;
  bool exited = false;
  int wait_status = 0;
  while (true) {
    if (StopRequested() && !sent_sigterm) {
      Progress("all: stopping " + std::to_string(child.pid) + " (SIGTERM)");
      kill(child.pid, SIGTERM);
      sent_sigterm = true;
    }
    pollfd p{child.stdout_fd, POLLIN, 0};
    const int ready = poll(&p, 1, exited ? 0 : 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready > 0) {
      if (ForwardChunk(child.stdout_fd, captured)) continue;
      break;  // end of file: every writer closed the pipe
    }
    if (exited) break;  // exited and nothing left to read
    exited = waitpid(child.pid, &wait_status, WNOHANG) == child.pid;
  }
  close(child.stdout_fd);
  while (!exited) {
    const pid_t r = waitpid(child.pid, &wait_status, 0);
    exited = r == child.pid || (r < 0 && errno != EINTR);
  }
  return ToChildExit(wait_status, std::move(captured), sent_sigterm);
}

}  // namespace

Result<ChildExit> RunChild(const std::vector<std::string>& argv) {
  CELLAR_ASSIGN_OR_RETURN(Child child, SpawnChild(argv));
  return ForwardUntilExit(child);
}

}  // namespace cellar::bench
