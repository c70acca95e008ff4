#include "server/http_probe.h"

namespace cellar {

HttpProbe::HttpProbe(MetricsRegistry* registry)
    : registry_(registry),
      batch_cells_(&registry->GetHistogram("cellar_http_batch_cells",
                                           "Cells per accepted batch request", {},
                                           {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 10000})),
      in_flight_(&registry->GetGauge("cellar_http_in_flight", "Requests being handled")) {}

Counter& HttpProbe::Requests(const std::string& route, int code) {
  return registry_->GetCounter("cellar_http_requests_total",
                               "HTTP requests answered, by route and status",
                               {{"route", route}, {"code", std::to_string(code)}});
}

Histogram& HttpProbe::RequestSeconds(const std::string& route) {
  return registry_->GetHistogram("cellar_http_request_seconds", "HTTP request latency by route",
                                 {{"route", route}});
}

Counter& HttpProbe::ShardErrors(uint32_t shard) {
  return registry_->GetCounter("cellar_http_shard_errors_total",
                               "Requests (or batch cells' rows) that failed because of a shard",
                               {{"shard", std::to_string(shard)}});
}

Gauge& HttpProbe::TlsCertificateExpiry() {
  return registry_->GetGauge("cellar_http_tls_certificate_expiry_timestamp_seconds",
                             "When the served TLS certificate expires (notAfter, Unix seconds)");
}

}  // namespace cellar
