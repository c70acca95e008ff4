// WebhookSink: a local HTTP receiver of webhook deliveries, in process, on a
// free 127.0.0.1 port (cpp-httplib). Every POST, to any path, is passed to the
// handler, whose return value is the HTTP status answered (with a short
// body). For tests and benchmarks that run webhook triggers against a sink
// they observe directly; the standalone program is cellar-webhook-sink. The
// listen backlog is raised to SOMAXCONN (cpp-httplib's is 5), so callers
// opening a connection per delivery do not wait for SYN retransmissions.
//
// Threading: the handler is called concurrently from the server's worker
// threads and must be thread-safe; it must not block longer than the
// caller's webhook timeout. port()/Url() may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"

namespace cellar::testing {

// cpp-httplib listens with a backlog of CPPHTTPLIB_LISTEN_BACKLOG (5). A
// webhook caller opens a connection per delivery (and a trigger opens up to
// its concurrency at once), so the accept queue overflows whenever the
// server's accept thread does not run at once, the kernel drops the SYN and
// that connect waits ~1 s for the retransmission: a property of the server,
// not of the caller. Raises the backlog of this process's socket listening on
// `port` to SOMAXCONN. For any in-process httplib::Server of a test, after
// bind_to_any_port(); WebhookSink does it itself. Best effort: nothing
// changes if no such socket is found.
void RaiseListenBacklog(int port);

class WebhookSink {
 public:
  // Gets the request path and body; returns the HTTP status to answer.
  using Handler = std::function<int(const std::string& path, const std::string& body)>;

  // Listens on 127.0.0.1 on a free port and serves until destroyed, on
  // `threads` worker threads (0: cpp-httplib's default, 8 on 2 cores; a kept-
  // alive connection holds one while it is open). Returns once the server
  // accepts connections; Unavailable when no port could be bound or the
  // server did not come up within 5 s. Its threads are named `thread_name`
  // (at most 15 characters), so a benchmark can tell their CPU from the rest.
  static Result<std::unique_ptr<WebhookSink>> Start(Handler handler, int threads = 0,
                                                    std::string thread_name = "webhook-sink");

  // One received request, for handlers that look at more than the body.
  struct Request {
    std::string path;
    std::map<std::string, std::string> headers;  // names lower-cased; the last of repeats
    std::string body;
  };
  using RequestHandler = std::function<int(const Request& request)>;
  // As Start(Handler), with the request's headers too.
  static Result<std::unique_ptr<WebhookSink>> StartWithHeaders(RequestHandler handler);

  // Stops the server (in-flight requests finish) and joins its thread.
  ~WebhookSink();
  WebhookSink(const WebhookSink&) = delete;
  WebhookSink& operator=(const WebhookSink&) = delete;

  int port() const;
  // "http://127.0.0.1:<port><path>"; `path` starts with '/'.
  std::string Url(const std::string& path) const;

 private:
  struct Impl;
  explicit WebhookSink(std::unique_ptr<Impl> impl);
  // Binds a free port and serves the handlers registered on impl's server.
  static Result<std::unique_ptr<WebhookSink>> Listen(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar::testing
