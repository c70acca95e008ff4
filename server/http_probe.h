// HttpProbe: the worker node's metrics (http_server.h), each registered here
// and nowhere else; the server updates them.
//   cellar_http_requests_total{route,code}     requests answered
//   cellar_http_request_seconds{route}         latency histogram
//   cellar_http_batch_cells                    cells per accepted batch request
//   cellar_http_shard_errors_total{shard}      requests failed by a shard (503/500)
//   cellar_http_in_flight                      requests being handled
//   cellar_http_tls_certificate_expiry_timestamp_seconds  HTTPS only: the served
//                                              certificate's notAfter (Unix seconds)
// Ownership: the registry is not owned and outlives the probe. Threading: all
// methods are thread-safe; returned references live as long as the registry.
#pragma once

#include <cstdint>
#include <string>

#include "base/metrics.h"

namespace cellar {

class HttpProbe {
 public:
  explicit HttpProbe(MetricsRegistry* registry);

  Counter& Requests(const std::string& route, int code);
  Histogram& RequestSeconds(const std::string& route);
  Histogram& BatchCells() { return *batch_cells_; }
  Counter& ShardErrors(uint32_t shard);
  Gauge& InFlight() { return *in_flight_; }
  Gauge& TlsCertificateExpiry();

 private:
  MetricsRegistry* registry_;
  Histogram* batch_cells_;
  Gauge* in_flight_;
};

}  // namespace cellar
