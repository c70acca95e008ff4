#include "server/http_server.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "api/api_wire.h"
#include "base/log.h"
#include "server/http_probe.h"

namespace cellar {
namespace {

using Clock = std::chrono::steady_clock;

// What the handler learned about the request on this worker thread, for the
// logger that httplib calls on the same thread after writing the response.
struct RequestContext {
  std::optional<Clock::time_point> start;
  RouteKind route = RouteKind::kUnmatched;
  std::string principal;
  std::vector<uint32_t> failed_shards;
  size_t batch_cells = 0;
  size_t in_bytes = 0;  // request body bytes read (after any Content-Encoding)
};
thread_local RequestContext t_request;

const char* ReasonCode(int status) {
  switch (status) {
    case 400:
      return "InvalidArgument";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 408:
      return "DeadlineExceeded";
    case 413:
      return "ResourceExhausted";
    case 414:
      return "InvalidArgument";
    case 415:
      return "InvalidArgument";
    case 431:
      return "InvalidArgument";
    case 503:
      return "Unavailable";
    default:
      return status >= 500 ? "Internal" : "InvalidArgument";
  }
}

std::string DefaultMessage(int status) {
  switch (status) {
    case 400:
      return "malformed HTTP request";
    case 413:
      return "the request body is too large";
    case 414:
      return "the request URI is too long";
    case 431:
      return "the request headers are too large";
    default:
      return "HTTP " + std::to_string(status);
  }
}

void SetJsonError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(DumpJson(ErrorJson(ReasonCode(status), message)), "application/json");
}

bool Readable(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

struct HttpServer::Impl {
  const CellApi* api = nullptr;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  MetricsRegistry* metrics = nullptr;
  std::unique_ptr<HttpProbe> probe;
  std::atomic<int64_t> in_flight{0};

  void Answer(const httplib::Request& req, httplib::Response& res, std::string body) {
    ApiRequest a;
    a.method = req.method;
    a.path = req.path;
    for (const auto& [k, v] : req.params) a.params.emplace_back(k, v);
    a.body = std::move(body);
    a.authorization = req.get_header_value("Authorization");
    ApiResponse r = api->Handle(a);
    res.status = r.status;
    for (const auto& [k, v] : r.headers) res.set_header(k, v);
    res.set_content(std::move(r.body), "application/json");
    t_request.route = r.route;
    t_request.in_bytes = a.body.size();
    t_request.principal = std::move(r.principal);
    t_request.failed_shards = std::move(r.failed_shards);
    t_request.batch_cells = r.batch_cells;
  }

  // PUT/POST/PATCH/DELETE: reads the body ourselves to bound it after any
  // Content-Encoding is undone (httplib bounds only Content-Length bodies).
  void AnswerWithBody(const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader) {
    if (req.is_multipart_form_data()) {
      t_request.route = MatchRoute(req.method, req.path).kind;
      SetJsonError(res, 415, "multipart bodies are not accepted: send the JSON as the body");
      res.set_header("Connection", "close");
      return;
    }
    const int64_t limit = api->options().max_request_bytes;
    std::string body;
    bool too_large = false;
    bool read = false;
    try {
      read = reader([&](const char* data, size_t n) {
        if (static_cast<int64_t>(body.size() + n) > limit) {
          too_large = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
    } catch (const std::exception&) {
      read = false;
    }
    t_request.in_bytes = body.size();
    if (!read) {
      t_request.route = MatchRoute(req.method, req.path).kind;
      if (too_large || res.status == 413)
        SetJsonError(res, 413,
                     "the request body is over the limit of " + std::to_string(limit) + " bytes");
      else
        SetJsonError(res, 400, "the request body could not be read (truncated or malformed)");
      res.set_header("Connection", "close");
      return;
    }
    Answer(req, res, std::move(body));
  }

  void Record(const httplib::Request& req, const httplib::Response& res) {
    RequestContext ctx = std::move(t_request);
    t_request = RequestContext();
    const double seconds =
        ctx.start ? std::chrono::duration<double>(Clock::now() - *ctx.start).count() : 0;
    const std::string route = RouteLabel(ctx.route);
    probe->Requests(route, res.status).Increment();
    probe->RequestSeconds(route).Observe(seconds);
    if (ctx.batch_cells > 0) probe->BatchCells().Observe(static_cast<double>(ctx.batch_cells));
    for (uint32_t shard : ctx.failed_shards) probe->ShardErrors(shard).Increment();
    if (!LogEnabled(LogLevel::kInfo)) return;  // the fields below cost a dozen allocations
    std::string path = req.path.substr(0, 200);
    LogInfo("http", "request",
            {{"method", req.method.substr(0, 16)},
             {"path", path},
             {"status", std::to_string(res.status)},
             {"ms", std::to_string(seconds * 1e3)},
             {"in_bytes", std::to_string(ctx.in_bytes)},
             {"out_bytes", std::to_string(res.body.size())},
             {"client", req.remote_addr},
             {"token", ctx.principal.empty() ? "-" : ctx.principal}});
  }
};

// The notAfter of the first certificate in the PEM file at `path`, Unix seconds.
static Result<int64_t> CertificateNotAfter(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "r"), &BIO_free);
  if (!bio) return InvalidArgument("cannot read the TLS certificate '" + path + "'");
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  std::tm tm{};
  if (!cert || ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1)
    return InvalidArgument("no certificate with an expiry in '" + path + "'");
  return static_cast<int64_t>(timegm(&tm));
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const CellApi* api,
                                                      const HttpServerOptions& o) {
  const bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (tls && (o.tls_cert_file.empty() || o.tls_key_file.empty()))
    return InvalidArgument("TLS needs both a certificate (--tls-cert) and a key (--tls-key)");
  if (tls && !Readable(o.tls_cert_file))
    return InvalidArgument("cannot read the TLS certificate '" + o.tls_cert_file + "'");
  if (tls && !Readable(o.tls_key_file))
    return InvalidArgument("cannot read the TLS key '" + o.tls_key_file + "'");
  if (o.threads < 1) return InvalidArgument("threads must be >= 1");

  std::unique_ptr<HttpServer> self(new HttpServer());
  self->tls_ = tls;
  if (!o.metrics) self->owned_metrics_ = std::make_unique<MetricsRegistry>();
  self->metrics_ = o.metrics ? o.metrics : self->owned_metrics_.get();
  self->impl_ = std::make_unique<Impl>();
  Impl& m = *self->impl_;
  m.api = api;
  m.metrics = self->metrics_;
  m.probe = std::make_unique<HttpProbe>(m.metrics);
  if (tls) {
    auto ssl =
        std::make_unique<httplib::SSLServer>(o.tls_cert_file.c_str(), o.tls_key_file.c_str());
    if (!ssl->is_valid())
      return InvalidArgument("OpenSSL rejected the TLS certificate '" + o.tls_cert_file +
                             "' or key '" + o.tls_key_file + "'");
    m.server = std::move(ssl);
    CELLAR_ASSIGN_OR_RETURN(const int64_t expiry, CertificateNotAfter(o.tls_cert_file));
    m.probe->TlsCertificateExpiry().Set(static_cast<double>(expiry));
  } else {
    m.server = std::make_unique<httplib::Server>();
  }
  httplib::Server& s = *m.server;
  const int threads = o.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(static_cast<size_t>(api->options().max_request_bytes));
  s.set_read_timeout(o.read_timeout_ms / 1000, (o.read_timeout_ms % 1000) * 1000);
  s.set_write_timeout(o.write_timeout_ms / 1000, (o.write_timeout_ms % 1000) * 1000);
  s.set_keep_alive_timeout(o.keep_alive_timeout_s);
  s.set_keep_alive_max_count(static_cast<size_t>(o.keep_alive_max_requests));
  s.set_tcp_nodelay(true);

  Impl* impl = &m;
  s.set_pre_routing_handler([impl](const httplib::Request&, httplib::Response&) {
    t_request = RequestContext();
    t_request.start = Clock::now();
    impl->probe->InFlight().Set(static_cast<double>(++impl->in_flight));
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto plain = [impl](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/metrics" && (req.method == "GET" || req.method == "HEAD")) {
      t_request.route = RouteKind::kMetrics;
      res.set_content(impl->metrics->Render(), "text/plain; version=0.0.4");
      return;
    }
    impl->Answer(req, res, "");
  };
  auto with_body = [impl](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) {
    impl->AnswerWithBody(req, res, reader);
  };
  s.Get(".*", plain);
  s.Options(".*", plain);
  s.Put(".*", with_body);
  s.Post(".*", with_body);
  s.Patch(".*", with_body);
  s.Delete(".*", with_body);
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) SetJsonError(res, res.status, DefaultMessage(res.status));
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SetJsonError(res, 500, "internal error");
  });
  s.set_logger([impl](const httplib::Request& req, const httplib::Response& res) {
    if (t_request.start) impl->probe->InFlight().Set(static_cast<double>(--impl->in_flight));
    impl->Record(req, res);
  });

  std::string host = o.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (o.port == 0) {
    self->port_ = s.bind_to_any_port(host);
    if (self->port_ < 0)
      return Unavailable("cannot listen on " + o.host + " (any port): bind failed");
  } else {
    if (!s.bind_to_port(host, o.port))
      return Unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                         ": bind failed (address in use or not local?)");
    self->port_ = o.port;
  }
  m.thread = std::thread([impl] { impl->server->listen_after_bind(); });
  // Wait until the accept loop runs, so that an early Stop() is not lost.
  for (int i = 0; i < 5000 && !s.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LogInfo("http", "listening",
          {{"address", o.host + ":" + std::to_string(self->port_)},
           {"tls", tls ? "on" : "off"},
           {"threads", std::to_string(threads)}});
  return self;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (!impl_ || !impl_->server) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->server.reset();
}

}  // namespace cellar
