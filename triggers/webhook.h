// Webhook triggers: a TriggerHandler that POSTs the change-log event JSON
// (changelog/cell_event.h, body always included) to a URL, with the event's
// CloudEvents attributes as ce-* headers (HTTP binding, binary mode).
//   2xx                       success
//   timeout, connection error, 5xx, 429   failed attempt (retried by the policy)
//   other 4xx                 per on_4xx: dead_letter (set aside at once, the
//                             default), drop (counted as handled), retry
// Connections are kept alive and reused (one call at a time each; up to 64
// idle, none idle over 2 s), so a delivery pays no handshake. Thread-safe.
#pragma once

#include "triggers/trigger_config.h"
#include "triggers/trigger_worker.h"

namespace cellar {

// The handler for `config`. InvalidArgument for a URL it cannot use.
Result<TriggerHandler> MakeWebhookHandler(const WebhookTriggerConfig& config);

// TriggerOptions carrying the webhook's filter, retry and dead-letter policies.
TriggerOptions WebhookTriggerOptions(const WebhookTriggerConfig& config);

}  // namespace cellar
