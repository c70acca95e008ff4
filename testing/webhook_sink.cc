#include "testing/webhook_sink.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include "testing/wait_for.h"

namespace cellar::testing {

struct WebhookSink::Impl {
  httplib::Server server;
  int port = -1;
  std::thread thread;
};

WebhookSink::WebhookSink(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<WebhookSink>> WebhookSink::Start(Handler handler) {
  auto impl = std::make_unique<Impl>();
  impl->server.Post(
      ".*", [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        res.status = handler(req.path, req.body);
        res.set_content(res.status >= 200 && res.status < 300 ? "ok" : "no", "text/plain");
      });
  impl->port = impl->server.bind_to_any_port("127.0.0.1");
  if (impl->port <= 0) return Unavailable("webhook sink: cannot bind a port on 127.0.0.1");
  httplib::Server* server = &impl->server;
  impl->thread = std::thread([server] { server->listen_after_bind(); });
  // Owned from here: the destructor stops the server and joins the thread.
  std::unique_ptr<WebhookSink> sink(new WebhookSink(std::move(impl)));
  if (!WaitFor([server] { return server->is_running(); }, std::chrono::seconds(5),
               std::chrono::milliseconds(1)))
    return Unavailable("webhook sink: the server did not start listening within 5 s");
  return sink;
}

WebhookSink::~WebhookSink() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int WebhookSink::port() const { return impl_->port; }

std::string WebhookSink::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(impl_->port) + path;
}

}  // namespace cellar::testing
