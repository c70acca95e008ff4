#include "testing/webhook_sink.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <thread>

#include "base/thread_name.h"
#include "testing/wait_for.h"

namespace cellar::testing {

// Calling listen() again on the listening socket raises its backlog (Linux);
// the socket is found among this process's descriptors as the one listening
// on `port`.
void RaiseListenBacklog(int port) {
  const long max_fd = sysconf(_SC_OPEN_MAX);
  for (int fd = 0; fd < max_fd && fd < 65536; ++fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (addr.sin_family != AF_INET || ntohs(addr.sin_port) != port) continue;
    int listening = 0;
    socklen_t opt_len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &opt_len) != 0 || !listening)
      continue;
    listen(fd, SOMAXCONN);
    return;
  }
}

struct WebhookSink::Impl {
  httplib::Server server;
  int port = -1;
  std::thread thread;
  std::string thread_name = "webhook-sink";
};

WebhookSink::WebhookSink(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// As a production receiver would: answers leave at once (no Nagle wait on a
// kept-alive connection) and a connection serves many deliveries.
void Configure(httplib::Server& server) {
  server.set_tcp_nodelay(true);
  server.set_keep_alive_max_count(10000);
}

void Answer(int status, httplib::Response& res) {
  res.status = status;
  res.set_content(status >= 200 && status < 300 ? "ok" : "no", "text/plain");
}

}  // namespace

Result<std::unique_ptr<WebhookSink>> WebhookSink::Start(Handler handler, int threads,
                                                        std::string thread_name) {
  auto impl = std::make_unique<Impl>();
  Configure(impl->server);
  if (threads > 0)
    impl->server.new_task_queue = [threads] {
      return new httplib::ThreadPool(static_cast<size_t>(threads));
    };
  impl->thread_name = thread_name;
  impl->server.Post(".*", [handler = std::move(handler), thread_name](const httplib::Request& req,
                                                                      httplib::Response& res) {
    // A worker of cpp-httplib's pool serves one sink for its life.
    thread_local const bool named = (NameThisThread(thread_name), true);
    (void)named;
    Answer(handler(req.path, req.body), res);
  });
  return Listen(std::move(impl));
}

Result<std::unique_ptr<WebhookSink>> WebhookSink::StartWithHeaders(RequestHandler handler) {
  auto impl = std::make_unique<Impl>();
  Configure(impl->server);
  impl->server.Post(
      ".*", [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        Request request;
        request.path = req.path;
        for (const auto& [name, value] : req.headers) {
          std::string lower = name;
          for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          request.headers[lower] = value;
        }
        request.body = req.body;
        Answer(handler(request), res);
      });
  return Listen(std::move(impl));
}

Result<std::unique_ptr<WebhookSink>> WebhookSink::Listen(std::unique_ptr<Impl> impl) {
  impl->port = impl->server.bind_to_any_port("127.0.0.1");
  if (impl->port <= 0) return Unavailable("webhook sink: cannot bind a port on 127.0.0.1");
  RaiseListenBacklog(impl->port);
  httplib::Server* server = &impl->server;
  impl->thread = std::thread([server, name = impl->thread_name] {
    NameThisThread(name);
    server->listen_after_bind();
  });
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
