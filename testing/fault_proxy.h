// FaultProxy: a TCP proxy on a free 127.0.0.1 port in front of a server on
// 127.0.0.1:<target_port>, for tests that need a request to reach the server
// while its answer is lost on the way back (a lost COMMIT acknowledgement, a
// lost HTTP response).
//
// Every accepted connection gets its own connection to the target and two
// threads copying bytes, one per direction. Nothing is changed or delayed
// unless armed:
//
// DropNextAnswer(match) arms the proxy once. The next client->server read (one
// read() of up to 64 KiB, which for a small request written with one send() is
// the whole request) for which match(bytes) is true is forwarded to the server
// as usual. The server's next bytes on that connection, its answer, are read
// but not forwarded: receiving them proves the server processed the request
// (for MariaDB, an OK to COMMIT is sent only once the transaction is durable).
// Then both sockets of that connection are closed, so the client sees the
// connection lost while it waits for the answer. answers_dropped() counts the
// answers dropped so far; a test asserts on it, so a match that never happened
// fails the test instead of passing it vacuously.
//
// IsMysqlQuery(sql) is a matcher for a MySQL COM_QUERY packet carrying exactly
// `sql` (plain text protocol, no TLS, no compression: what the test servers
// and Cellar's connections use). IsHttpRequest(method) matches a request line
// starting with "<method> ".
//
// Threading: every method is thread-safe. The destructor closes every
// connection and joins all threads.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace cellar::testing {

class FaultProxy {
 public:
  using Matcher = std::function<bool(std::string_view bytes)>;

  // Listens on a free loopback port. Aborts the process with a message if no
  // socket can be opened (a broken test machine, not a test failure).
  explicit FaultProxy(int target_port);
  ~FaultProxy();

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }

  // Arms the proxy (replacing an earlier, unused arming). See above.
  void DropNextAnswer(Matcher match);
  int answers_dropped() const { return dropped_.load(); }

  static Matcher IsMysqlQuery(std::string sql);
  static Matcher IsHttpRequest(std::string method);

 private:
  struct Connection;
  void AcceptLoop();
  void Pump(Connection* c, bool client_to_server);
  // The armed matcher if `bytes` matches it (disarming it), else null.
  bool TakeMatch(std::string_view bytes);

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> dropped_{0};
  std::mutex mu_;
  Matcher armed_;                                       // guarded by mu_
  std::list<std::unique_ptr<Connection>> connections_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace cellar::testing
