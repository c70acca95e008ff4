#include "triggers/webhook.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "base/time.h"
#include "triggers/webhook_signature.h"

namespace cellar {
namespace {

struct ParsedUrl {
  std::string origin;  // scheme://host[:port]
  std::string path;    // "/..." (at least "/")
};

Result<ParsedUrl> ParseUrl(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("webhook URL has no scheme: " + url);
  std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    return InvalidArgument("webhook URL must be http or https: " + url);
  size_t path_start = url.find('/', scheme_end + 3);
  ParsedUrl p;
  p.origin = url.substr(0, path_start);
  p.path = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (p.origin.size() <= scheme_end + 3) return InvalidArgument("webhook URL has no host: " + url);
  return p;
}

// Idle keep-alive connections to one origin, so that deliveries do not pay a
// TCP (and TLS) handshake each. A client is used by one call at a time; one
// whose request failed is dropped (its connection may be broken), and one
// idle longer than kMaxIdleMs too: servers close idle connections (5 s by
// default in common servers), and a request on a closed one would fail.
class ConnectionPool {
 public:
  ConnectionPool(std::string origin, int timeout_ms, std::string ca_file)
      : origin_(std::move(origin)), timeout_ms_(timeout_ms), ca_file_(std::move(ca_file)) {}

  std::unique_ptr<httplib::Client> Acquire() {
    const auto now = std::chrono::steady_clock::now();
    {
      MutexLock lock(&mu_);
      while (!idle_.empty()) {
        auto [client, since] = std::move(idle_.back());
        idle_.pop_back();
        if (now - since < std::chrono::milliseconds(kMaxIdleMs)) return std::move(client);
        idle_.clear();  // the rest were idle even longer
      }
    }
    auto c = std::make_unique<httplib::Client>(origin_);
    const time_t sec = timeout_ms_ / 1000, usec = (timeout_ms_ % 1000) * 1000;
    c->set_connection_timeout(sec, usec);
    c->set_read_timeout(sec, usec);
    c->set_write_timeout(sec, usec);
    c->set_keep_alive(true);
    // Headers and body go in two writes: without TCP_NODELAY the second waits
    // for the server's delayed ACK (40 ms) on a kept-alive connection.
    c->set_tcp_nodelay(true);
    // https: the receiver's certificate chains to ca_file (or the system's CAs).
    c->enable_server_certificate_verification(true);
    if (!ca_file_.empty()) c->set_ca_cert_path(ca_file_.c_str());
    return c;
  }
  void Release(std::unique_ptr<httplib::Client> c) {
    MutexLock lock(&mu_);
    if (idle_.size() < kMaxIdle) idle_.emplace_back(std::move(c), std::chrono::steady_clock::now());
  }

 private:
  static constexpr size_t kMaxIdle = 64;
  static constexpr int kMaxIdleMs = 2000;
  const std::string origin_;
  const int timeout_ms_;
  const std::string ca_file_;
  Mutex mu_;
  // Most recently released last.
  std::vector<std::pair<std::unique_ptr<httplib::Client>, std::chrono::steady_clock::time_point>>
      idle_ GUARDED_BY(mu_);
};

// POSTs `body` and maps the answer to a Status (webhook.h). Any thread.
class WebhookPoster {
 public:
  WebhookPoster(ParsedUrl url, const WebhookTriggerConfig& config, std::vector<std::string> keys)
      : url_(std::move(url)),
        pool_(std::make_shared<ConnectionPool>(url_.origin, config.timeout_ms, config.ca_file)),
        on_4xx_(config.on_4xx),
        keys_(std::move(keys)) {}

  // Signed (webhook_signature.h) with `id` as webhook-id when the trigger has
  // keys. `answer` (may be null) receives a 2xx answer's body.
  Status Post(httplib::Headers headers, const std::string& body, const char* content_type,
              const std::string& id, std::string* answer = nullptr) const {
    if (!keys_.empty()) {
      const int64_t now = NowMicros() / 1000000;
      headers.emplace("webhook-id", id);
      headers.emplace("webhook-timestamp", std::to_string(now));
      headers.emplace("webhook-signature", SignWebhook(keys_, id, now, body));
    }
    std::unique_ptr<httplib::Client> client = pool_->Acquire();
    auto res = client->Post(url_.path.c_str(), headers, body, content_type);
    if (!res)
      return Unavailable("webhook " + url_.origin + url_.path + ": " +
                         httplib::to_string(res.error()));
    pool_->Release(std::move(client));
    const int code = res->status;
    if (code >= 200 && code < 300) {
      if (answer) *answer = std::move(res->body);
      return Status::Ok();
    }
    const std::string what =
        "webhook " + url_.origin + url_.path + " answered " + std::to_string(code);
    if (code >= 500 || code == 429 || code == 408) return Unavailable(what);
    if (code >= 400) {
      switch (on_4xx_) {
        case On4xx::kDrop:
          return Status::Ok();
        case On4xx::kRetry:
          return Unavailable(what);
        case On4xx::kDeadLetter:
          return FailedPrecondition(what);
      }
    }
    return FailedPrecondition(what + " (unexpected status)");
  }

 private:
  const ParsedUrl url_;
  const std::shared_ptr<ConnectionPool> pool_;
  const On4xx on_4xx_;
  const std::vector<std::string> keys_;  // decoded signing keys
};

// The poster of `config`: InvalidArgument for a URL it cannot use or a
// secret it cannot read (naming the trigger and the source).
Result<std::shared_ptr<WebhookPoster>> MakePoster(const WebhookTriggerConfig& config) {
  CELLAR_ASSIGN_OR_RETURN(ParsedUrl url, ParseUrl(config.url));
  if (url.origin.rfind("https://", 0) != 0 && !config.ca_file.empty())
    return InvalidArgument("ca_file is for https:// URLs only: " + config.url);
  auto keys = LoadWebhookSecrets(config.secrets);
  if (!keys.ok()) return keys.status();
  return std::make_shared<WebhookPoster>(std::move(url), config, std::move(keys).value());
}

// The request's data: the event as published on the change log, printed
// again (into *scratch) only when the consumer did not keep that text.
const std::string& EventData(const CellEvent& e, std::string* scratch) {
  if (!e.published_json.empty()) return e.published_json;
  *scratch = EncodeCellEvent(e.datastore, e.cell, INT64_MAX);
  return *scratch;
}

std::string EventId(const CellEvent& e) {
  return e.datastore + "/" + std::to_string(e.cell.shard) + "/" + std::to_string(e.cell.added_id);
}

}  // namespace

TriggerOptions WebhookTriggerOptions(const WebhookTriggerConfig& config) {
  TriggerOptions o;
  o.retry = config.retry;
  o.dead_letter = config.dead_letter;
  o.filter = config.filter;
  o.include_tombstones = config.include_tombstones;
  o.max_batch = config.batch_size;
  o.batch_linger_ms = config.batch_window_ms;
  o.handler_timeout_ms = 0;  // each request is bounded by config.timeout_ms
  o.forward_published_json = true;
  return o;
}

Result<TriggerHandler> MakeWebhookHandler(const WebhookTriggerConfig& config) {
  CELLAR_ASSIGN_OR_RETURN(std::shared_ptr<WebhookPoster> poster, MakePoster(config));
  const std::string name = config.name;
  return TriggerHandler([poster, name](const CellEvent& e, TriggerContext& ctx) -> Status {
    const std::string id = EventId(e);
    httplib::Headers headers{{"X-Cellar-Trigger", name}, {"X-Cellar-Event-Id", id}};
    // CloudEvents HTTP binding, binary mode: the same attributes as the
    // change-log record's ce_* headers (changelog/cell_event.h).
    for (EventHeader& h : CloudEventHeaders(CloudEventBinding::kHttp, ctx.store().config().kafka,
                                            e.datastore, e.cell))
      headers.emplace(std::move(h.name), std::move(h.value));
    std::string scratch;
    return poster->Post(std::move(headers), EventData(e, &scratch), "application/json", id);
  });
}

std::string EncodeWebhookBatch(const KafkaConfig& kafka,
                               const std::vector<const CellEvent*>& events,
                               std::vector<std::string>* ids) {
  std::string out = "[";
  std::string scratch;
  for (const CellEvent* e : events) {
    if (out.size() > 1) out += ',';
    out += '{';
    // Structured mode: the ce-* attributes as members, the event as "data".
    for (const EventHeader& h :
         CloudEventHeaders(CloudEventBinding::kHttp, kafka, e->datastore, e->cell)) {
      const std::string_view attribute =
          std::string_view(h.name).substr(h.name.rfind("ce-", 0) == 0 ? 3 : 0);
      if (ids && attribute == "id") ids->push_back(h.value);
      out += nlohmann::json(attribute).dump();
      out += ':';
      out += nlohmann::json(h.value).dump();
      out += ',';
    }
    out += R"("datacontenttype":"application/json","data":)";
    out += EventData(*e, &scratch);
    out += '}';
  }
  out += ']';
  return out;
}

namespace {

// A batch's 2xx answer may name failed events, as Lambda's
// ReportBatchItemFailures does: {"batchItemFailures": [{"itemIdentifier":
// "<ce id>"}, ...]}. They go to `ctx`; the rest of the batch is done.
Status ApplyBatchAnswer(const std::string& answer, const std::vector<std::string>& ids,
                        TriggerContext& ctx) {
  auto j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("batchItemFailures")) return Status::Ok();
  const nlohmann::json& failures = j["batchItemFailures"];
  if (failures.is_null()) return Status::Ok();
  auto unusable = [](const std::string& why) {
    return Unavailable("webhook answered 2xx with an unusable batchItemFailures: " + why);
  };
  if (!failures.is_array()) return unusable("not an array");
  std::vector<size_t> failed;
  for (const auto& f : failures) {
    auto id = f.is_object() ? f.find("itemIdentifier") : f.end();
    if (!f.is_object() || id == f.end() || !id->is_string())
      return unusable("an item without a string itemIdentifier: " + f.dump());
    auto at = std::find(ids.begin(), ids.end(), id->get<std::string>());
    if (at == ids.end()) return unusable("'" + id->get<std::string>() + "' is not in the batch");
    failed.push_back(static_cast<size_t>(at - ids.begin()));
  }
  for (size_t i : failed)
    ctx.ReportFailure(i, Unavailable("webhook reported event " + ids[i] + " failed"));
  return Status::Ok();
}

}  // namespace

Result<TriggerBatchHandler> MakeWebhookBatchHandler(const WebhookTriggerConfig& config) {
  CELLAR_ASSIGN_OR_RETURN(std::shared_ptr<WebhookPoster> poster, MakePoster(config));
  const std::string name = config.name;
  return TriggerBatchHandler(
      [poster, name](const std::vector<const CellEvent*>& events, TriggerContext& ctx) -> Status {
        httplib::Headers headers{{"X-Cellar-Trigger", name},
                                 {"X-Cellar-Batch-Size", std::to_string(events.size())}};
        std::vector<std::string> ids;
        ids.reserve(events.size());
        const std::string body = EncodeWebhookBatch(ctx.store().config().kafka, events, &ids);
        std::string answer;
        // The id of a batch: its first event's and how many follow (stable
        // across the batch's retries unless a partial failure shrinks it).
        const std::string id = EventId(*events.front()) + "+" + std::to_string(events.size() - 1);
        CELLAR_RETURN_IF_ERROR(
            poster->Post(std::move(headers), body, kCloudEventsBatchContentType, id, &answer));
        return ApplyBatchAnswer(answer, ids, ctx);
      });
}

}  // namespace cellar
