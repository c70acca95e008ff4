#include "base/listening_sockets.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

namespace cellar {

int SetNoDelayOnListeningSockets(const std::vector<int>& ports) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  int changed = 0;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
        !listening)
      continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int port = -1;
    if (addr.ss_family == AF_INET)
      port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    else if (addr.ss_family == AF_INET6)
      port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) continue;
    const int one = 1;
    if (setsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0)
      ++changed;
  }
  closedir(dir);
  return changed;
}

int SetNoDelayOnListeningSockets(const std::string& bootstrap) {
  std::vector<int> ports;
  for (size_t pos = 0; pos < bootstrap.size();) {
    size_t end = bootstrap.find(',', pos);
    if (end == std::string::npos) end = bootstrap.size();
    const size_t colon = bootstrap.rfind(':', end - 1);
    if (colon != std::string::npos && colon > pos)
      ports.push_back(std::atoi(bootstrap.substr(colon + 1, end - colon - 1).c_str()));
    pos = end + 1;
  }
  return SetNoDelayOnListeningSockets(ports);
}

}  // namespace cellar
