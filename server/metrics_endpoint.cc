#include "server/metrics_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "base/host_port.h"
#include "base/log.h"

namespace cellar {

struct MetricsEndpoint::Impl {
  httplib::Server server;
  std::thread thread;
};

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const MetricsRegistry* registry,
                                                                const std::string& address) {
  CELLAR_ASSIGN_OR_RETURN(HostPort listen, ParseHostPort(address, "metrics address"));
  const std::string& host = listen.host;
  const int port = listen.port;

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
  LogInfo("metrics", "serving /metrics", {{"address", FormatHostPort(host, bound)}});
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
