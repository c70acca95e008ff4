#include "server/metrics_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "base/log.h"
#include "base/number_text.h"

namespace cellar {

struct MetricsEndpoint::Impl {
  httplib::Server server;
  std::thread thread;
};

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const MetricsRegistry* registry,
                                                                const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon != std::string::npos && colon > 0)
    port = ParseDecimalInteger<int>(std::string_view(address).substr(colon + 1)).value_or(-1);
  if (port < 0 || port > 65535)
    return InvalidArgument("metrics address must be host:port, got '" + address + "'");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')  // IPv6 literal
    host = host.substr(1, host.size() - 2);

  std::unique_ptr<MetricsEndpoint> self(new MetricsEndpoint());
  self->impl_ = std::make_unique<Impl>();
  httplib::Server& s = self->impl_->server;
  s.Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), "text/plain; version=0.0.4");
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return Unavailable("cannot listen on " + address + " for metrics");
  self->port_ = bound;
  Impl* impl = self->impl_.get();
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  // Wait until the accept loop runs, so that an early Stop() is not lost.
  for (int i = 0; i < 5000 && !s.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LogInfo("metrics", "serving /metrics", {{"address", host + ":" + std::to_string(bound)}});
  return self;
}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

void MetricsEndpoint::Stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool StartMetricsEndpointForMain(const MetricsRegistry* registry, const std::string& address,
                                 const std::string& program,
                                 std::unique_ptr<MetricsEndpoint>* endpoint, int* exit_code) {
  if (address.empty()) return true;
  auto started = MetricsEndpoint::Start(registry, address);
  if (!started.ok()) {
    std::cerr << program << ": " << started.status().ToString() << "\n";
    *exit_code = started.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    return false;
  }
  *endpoint = std::move(started).value();
  return true;
}

}  // namespace cellar
