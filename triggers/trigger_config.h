// Trigger definitions: retry and dead-letter policies, body filters, and
// webhook triggers declared in YAML.
//
// YAML (a file given to `cellar-trigger --triggers`, or to `cellar trigger ...`):
//   triggers:
//     - name: billing_hook                 # [a-z][a-z0-9_]{0,47}; its consumer group
//       datastore: trips
//       column: BASE
//       filter:                            # all must hold (AND); omitted = every event
//         - { field: status, op: "=", value: requested }
//         - { field: fare.total, op: ">=", value: 20 }
//       webhook:
//         url: "https://billing.internal:8443/hook"   # http:// or https://
//         timeout_ms: 2000
//         ca_file: /etc/cellar/ca.pem      # https: the CAs the receiver's certificate is
//                                          # checked against (default: the system's)
//         secrets:                         # Standard Webhooks signing (webhook_signature.h):
//           - { env: BILLING_HOOK_SECRET } # whsec_... read from a variable or a file,
//           - { file: /etc/cellar/next.secret }  # never the YAML; two during a rotation
//       retry: { max_attempts: 5, initial_backoff_ms: 100, max_backoff_ms: 10000,
//                on_4xx: dead_letter }     # dead_letter | drop | retry
//       dead_letter: { pause_after: 100, window: 10m, later_events_of_row: continue }
//       include_tombstones: true           # default; false: erases are not delivered
// Unknown keys are errors; every error names file, line and key.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "config/cluster_config.h"
#include "triggers/webhook_signature.h"

namespace cellar {

struct RetryPolicy {
  int max_attempts = 5;          // handler calls before the event is set aside (>= 1)
  int initial_backoff_ms = 100;  // wait before the 2nd attempt; doubles each time
  int max_backoff_ms = 10000;    // cap of the wait; full jitter on top (0..wait)
};

// What happens to later events of a row whose earlier event was set aside.
enum class LaterEventsPolicy {
  kContinue,  // default: they are handled normally (order between them still holds)
  kSetAside,  // they are set aside too, so the handler never sees a row out of order;
              // events re-run by `dlq retry` are handled (in DLQ order), new events of
              // the row stay set aside until the trigger restarts
};

struct DeadLetterPolicy {
  int pause_after = 100;  // set-aside events within `window_ms` that pause the trigger
  int64_t window_ms = 10 * 60 * 1000;
  LaterEventsPolicy later_events_of_row = LaterEventsPolicy::kContinue;
};

// One condition on a body field (dotted path into nested objects).
struct FieldCondition {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kExists };
  std::string field;
  Op op = Op::kEq;
  nlohmann::json value;  // for kIn: an array
};

// True when every condition holds for `body`. A missing field fails every
// condition except `!=` (which holds) and never throws.
bool MatchesFilter(const std::vector<FieldCondition>& filter, const nlohmann::json& body);

enum class On4xx { kDeadLetter, kDrop, kRetry };

struct WebhookTriggerConfig {
  std::string name;
  std::string datastore;
  std::string column;
  std::vector<FieldCondition> filter;
  std::string url;  // http://host:port/path or https://...
  int timeout_ms = 5000;
  // https: PEM file of the CAs the receiver's certificate must chain to
  // (empty: the system's CAs). The certificate is always verified.
  std::string ca_file;
  // Signing keys (at most 2: during a rotation both sign). Empty: deliveries
  // are not signed.
  std::vector<WebhookSecretSource> secrets;
  // Events per POST (1..10000). Above 1 the webhook receives batches: a JSON
  // array of events in CloudEvents' batched content mode (webhook.h).
  int batch_size = 1;
  // Batches only: how long a batch of fewer than batch_size waits for more
  // events, counted from its oldest (milliseconds, 0..60000).
  int batch_window_ms = 0;
  On4xx on_4xx = On4xx::kDeadLetter;
  RetryPolicy retry;
  DeadLetterPolicy dead_letter;
  // Erases are delivered as {"tombstone": true, "body": null} unless false.
  bool include_tombstones = true;
};

bool IsValidTriggerName(const std::string& name);

// Parses trigger definitions, validating datastore and column against `cluster`.
// InvalidArgument listing every error (file:line: key: message).
Result<std::vector<WebhookTriggerConfig>> ParseTriggerDefinitions(std::string_view yaml,
                                                                  const std::string& source,
                                                                  const ClusterConfig& cluster);
Result<std::vector<WebhookTriggerConfig>> LoadTriggerDefinitions(const std::string& path,
                                                                 const ClusterConfig& cluster);

}  // namespace cellar
