#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cellar {

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("create " + tmp + ": " + std::strerror(errno));
  std::string failed;  // the step that failed, with errno's text
  if (write(fd, contents.data(), contents.size()) != static_cast<ssize_t>(contents.size()))
    failed = "write " + tmp + ": " + std::strerror(errno);
  else if (fsync(fd) != 0)
    failed = "fsync " + tmp + ": " + std::strerror(errno);
  if (close(fd) != 0 && failed.empty()) failed = "close " + tmp + ": " + std::strerror(errno);
  if (failed.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
    failed = "rename " + tmp + " to " + path + ": " + std::strerror(errno);
  if (failed.empty()) return Status::Ok();
  unlink(tmp.c_str());
  return Internal(failed);
}

}  // namespace cellar
