#include "triggers/webhook.h"

#include <httplib.h>

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

}  // namespace

TriggerOptions WebhookTriggerOptions(const WebhookTriggerConfig& config) {
  TriggerOptions o;
  o.retry = config.retry;
  o.dead_letter = config.dead_letter;
  o.filter = config.filter;
  return o;
}

Result<TriggerHandler> MakeWebhookHandler(const WebhookTriggerConfig& config) {
  CELLAR_ASSIGN_OR_RETURN(ParsedUrl url, ParseUrl(config.url));
  const int timeout_ms = config.timeout_ms;
  const On4xx on_4xx = config.on_4xx;
  const std::string name = config.name;
  return TriggerHandler([url, timeout_ms, on_4xx, name](const CellEvent& e,
                                                        TriggerContext&) -> Status {
    httplib::Client client(url.origin);
    const time_t sec = timeout_ms / 1000, usec = (timeout_ms % 1000) * 1000;
    client.set_connection_timeout(sec, usec);
    client.set_read_timeout(sec, usec);
    client.set_write_timeout(sec, usec);
    httplib::Headers headers{
        {"X-Cellar-Trigger", name},
        {"X-Cellar-Event-Id",
         e.datastore + "/" + std::to_string(e.cell.shard) + "/" + std::to_string(e.cell.added_id)}};
    const std::string body = EncodeCellEvent(e.datastore, e.cell, INT64_MAX);
    auto res = client.Post(url.path.c_str(), headers, body, "application/json");
    if (!res)
      return Unavailable("webhook " + url.origin + url.path + ": " +
                         httplib::to_string(res.error()));
    const int code = res->status;
    if (code >= 200 && code < 300) return Status::Ok();
    const std::string what =
        "webhook " + url.origin + url.path + " answered " + std::to_string(code);
    if (code >= 500 || code == 429 || code == 408) return Unavailable(what);
    if (code >= 400) {
      switch (on_4xx) {
        case On4xx::kDrop:
          return Status::Ok();
        case On4xx::kRetry:
          return Unavailable(what);
        case On4xx::kDeadLetter:
          return FailedPrecondition(what);
      }
    }
    return FailedPrecondition(what + " (unexpected status)");
  });
}

}  // namespace cellar
