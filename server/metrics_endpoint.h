// MetricsEndpoint: the one place a program serves its MetricsRegistry
// (base/metrics.h) over HTTP. Libraries open no sockets for metrics; each main
// (cellar-relay, cellar-indexer, cellar-trigger, cellar-billing) starts one
// endpoint from its --metrics-address flag. cellard serves /metrics from its
// own HTTP server (http_server.h) instead.
//
//   GET /metrics   the registry in Prometheus text format (version 0.0.4)
//   GET /healthz   "ok" while the process runs
//
// Ownership: the registry is not owned and must outlive the endpoint.
// Threading: Start/Stop from one thread; requests are served on the endpoint's
// own threads (Render() is thread-safe). Start threads after the program
// blocked its termination signals (base/signal_wait.h), so that the serving
// threads inherit the mask.
#pragma once

#include <memory>
#include <string>

#include "base/metrics.h"
#include "base/status.h"

namespace cellar {

class MetricsEndpoint {
 public:
  // Binds `address` ("host:port"; port 0 picks a free port, see port()) and
  // starts serving. InvalidArgument for an address that is not host:port with
  // a port in 0..65535; Unavailable when it cannot be bound.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const MetricsRegistry* registry,
                                                        const std::string& address);
  ~MetricsEndpoint();  // Stop()

  // The bound port (the chosen one when the address asked for port 0).
  int port() const { return port_; }
  // Stops serving and joins the serving threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  MetricsEndpoint() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// A main's --metrics-address: leaves *endpoint null when `address` is empty,
// else starts one into it. Returns false when it could not start, after
// printing "<program>: <status>" on stderr and setting *exit_code to 2 for a
// malformed address (InvalidArgument) or 1 otherwise.
bool StartMetricsEndpointForMain(const MetricsRegistry* registry, const std::string& address,
                                 const std::string& program,
                                 std::unique_ptr<MetricsEndpoint>* endpoint, int* exit_code);

}  // namespace cellar
