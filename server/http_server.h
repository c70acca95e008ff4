// HttpServer: binds CellApi (cell_api.h) to a listening socket with
// cpp-httplib: HTTP/1.1 with keep-alive, optional TLS (OpenSSL), request body
// limits, Prometheus metrics on GET /metrics and one structured log line per
// request (method, path, status, duration, sizes, client address, token name;
// never bodies, query strings or tokens).
//
// Limits: a request body over `max_request_bytes` (after any Content-Encoding
// is undone) is answered 413 and the connection is closed; headers and URIs
// over httplib's limits (8 KiB) get 431/414; slow clients time out after
// `read_timeout_ms`. Each worker thread serves one connection at a time;
// connections beyond `threads` wait in the accept queue.
//
// Metrics: the HttpProbe's (http_probe.h), registered in options.metrics (or
// a registry of the server's own) and served with everything else in that
// registry at GET /metrics. The store's group-commit batch sizes are not
// observable through CellStore's public API, so they are not exported here.
//
// Threading: Start/Stop from one thread; the server runs on its own threads.
#pragma once

#include <memory>
#include <string>

#include "api/cell_api.h"
#include "base/metrics.h"
#include "base/status.h"

namespace httplib {
class Server;
}

namespace cellar {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (see HttpServer::port())
  std::string tls_cert_file;  // both set: serve HTTPS only
  std::string tls_key_file;
  int threads = 64;  // concurrent connections served
  int read_timeout_ms = 10000;
  int write_timeout_ms = 10000;
  int keep_alive_timeout_s = 5;
  int keep_alive_max_requests = 10000;
  // Where the server registers its metrics and what GET /metrics serves; not
  // owned, must outlive the server. Null: a registry of the server's own.
  MetricsRegistry* metrics = nullptr;
};

class HttpServer {
 public:
  // Binds and starts serving `api` (which must outlive the server).
  // InvalidArgument for unusable options (half a TLS pair, unreadable
  // certificate or key); Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(const CellApi* api,
                                                   const HttpServerOptions& options);
  // Stops (as Stop()).
  ~HttpServer();

  // The bound port (the chosen one when options.port was 0).
  int port() const { return port_; }
  bool tls() const { return tls_; }
  // The registry in use (options.metrics or the server's own).
  MetricsRegistry& metrics() { return *metrics_; }

  // Graceful stop: stops accepting, lets requests in progress finish (idle
  // keep-alive connections are closed within keep_alive_timeout_s) and joins
  // the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  HttpServer() = default;

  std::unique_ptr<MetricsRegistry> owned_metrics_;
  MetricsRegistry* metrics_ = nullptr;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace cellar
