#include "testing/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cellar::testing {

struct FaultProxy::Connection {
  int client_fd = -1;
  int server_fd = -1;
  std::atomic<bool> drop_answer{false};
  std::thread to_server, to_client;

  void ShutdownBoth() {
    ::shutdown(client_fd, SHUT_RDWR);
    ::shutdown(server_fd, SHUT_RDWR);
  }
  ~Connection() {
    ShutdownBoth();
    if (to_server.joinable()) to_server.join();
    if (to_client.joinable()) to_client.join();
    ::close(client_fd);
    ::close(server_fd);
  }
};

namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "FaultProxy: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

FaultProxy::FaultProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) Die("socket");
  sockaddr_in addr = Loopback(0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("bind");
  if (::listen(listen_fd_, 64) != 0) Die("listen");
  socklen_t len = sizeof(addr);
  if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) Die("getsockname");
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  ::close(listen_fd_);
  std::list<std::unique_ptr<Connection>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connections.swap(connections_);
  }
  connections.clear();  // each shuts its sockets down and joins its threads
}

void FaultProxy::DropNextAnswer(Matcher match) {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = std::move(match);
}

bool FaultProxy::TakeMatch(std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_ || !armed_(bytes)) return false;
  armed_ = nullptr;
  return true;
}

FaultProxy::Matcher FaultProxy::IsMysqlQuery(std::string sql) {
  // A packet is a 3-byte little-endian payload length, a sequence byte, then
  // the payload: COM_QUERY (0x03) followed by the statement text.
  return [sql = std::move(sql)](std::string_view b) {
    if (b.size() != 5 + sql.size()) return false;
    const size_t len = static_cast<unsigned char>(b[0]) |
                       (static_cast<size_t>(static_cast<unsigned char>(b[1])) << 8) |
                       (static_cast<size_t>(static_cast<unsigned char>(b[2])) << 16);
    return len == 1 + sql.size() && b[4] == 0x03 && b.substr(5) == sql;
  };
}

FaultProxy::Matcher FaultProxy::IsHttpRequest(std::string method) {
  return [prefix = std::move(method) + " "](std::string_view b) {
    return b.substr(0, prefix.size()) == prefix;
  };
}

void FaultProxy::AcceptLoop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = Loopback(target_port_);
    if (upstream < 0 ||
        ::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (upstream >= 0) ::close(upstream);
      ::close(fd);  // the client sees the connection refused-ish, as without the proxy
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>();
    c->client_fd = fd;
    c->server_fd = upstream;
    Connection* raw = c.get();
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // `c` closes both sockets
    raw->to_server = std::thread([this, raw] { Pump(raw, true); });
    raw->to_client = std::thread([this, raw] { Pump(raw, false); });
    connections_.push_back(std::move(c));
  }
}

void FaultProxy::Pump(Connection* c, bool client_to_server) {
  const int from = client_to_server ? c->client_fd : c->server_fd;
  const int to = client_to_server ? c->server_fd : c->client_fd;
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(from, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const std::string_view bytes(buf, static_cast<size_t>(n));
    if (client_to_server) {
      // Armed before forwarding, so the answer cannot overtake the flag.
      if (TakeMatch(bytes)) c->drop_answer = true;
    } else if (c->drop_answer) {
      ++dropped_;  // the server answered: the request was processed
      break;
    }
    if (!WriteAll(to, buf, static_cast<size_t>(n))) break;
  }
  c->ShutdownBoth();
}

}  // namespace cellar::testing
