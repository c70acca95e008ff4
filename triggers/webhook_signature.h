// Standard Webhooks signatures (https://www.standardwebhooks.com/), so that a
// receiver can tell Cellar's deliveries from anyone else's and a replayed
// request from a new one with the verifiers services already use. A signed
// delivery carries
//   webhook-id:        the event's id (the same on every retry of the event;
//                      a batch: its first event's id and "+<more events>")
//   webhook-timestamp: this attempt's time, Unix seconds
//   webhook-signature: "v1,<base64 of HMAC-SHA256(key, id + "." + timestamp +
//                      "." + body)>", one per active key, space-separated
// Keys are written "whsec_<base64>" (what the reference libraries take). Two
// keys may be active at once: during a rotation a receiver holding either
// accepts the delivery.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cellar {

// Where a trigger's key is read from: exactly one of an environment variable
// and a file (its content, surrounding whitespace trimmed). Never the YAML.
struct WebhookSecretSource {
  std::string env;
  std::string file;
  // "env CELLAR_HOOK_SECRET" / "file /etc/cellar/hook.secret" for messages.
  std::string Describe() const;
};

// The key bytes of "whsec_<base64>" (the prefix may be left out, as the
// reference verifiers allow). InvalidArgument when the rest is not base64 of
// at least 16 bytes; the message never holds the text.
Result<std::string> DecodeWebhookSecret(std::string_view text);

// Each source's key, in order. InvalidArgument naming the source (never the
// value) when a variable is unset, a file unreadable or a text not a key.
Result<std::vector<std::string>> LoadWebhookSecrets(
    const std::vector<WebhookSecretSource>& sources);

// The webhook-signature header value for `keys` (decoded key bytes).
std::string SignWebhook(const std::vector<std::string>& keys, std::string_view id,
                        int64_t timestamp_seconds, std::string_view body);

// What the reference verifiers check: the headers are present, the
// timestamp is within `tolerance_seconds` of `now_seconds` and a v1
// signature matches one of `keys`. InvalidArgument saying which failed.
Status VerifyWebhook(const std::vector<std::string>& keys, std::string_view id,
                     std::string_view timestamp, std::string_view signature, std::string_view body,
                     int64_t now_seconds, int64_t tolerance_seconds = 300);

}  // namespace cellar
