// Webhook triggers: a TriggerHandler that POSTs the change-log event JSON
// (changelog/cell_event.h, body always included) to a URL, with the event's
// CloudEvents attributes as ce-* headers (HTTP binding, binary mode).
//   2xx                       success
//   timeout, connection error, 5xx, 429   failed attempt (retried by the policy)
//   other 4xx                 per on_4xx: dead_letter (set aside at once, the
//                             default), drop (counted as handled), retry
// Batches (batch_size > 1, TriggerWorker::on_batch): one POST carries up to
// batch_size events as CloudEvents' batched content mode: Content-Type
// application/cloudevents-batch+json, the body a JSON array of events in
// structured mode (the ce-* attributes as members, "datacontenttype":
// "application/json" and the change-log event as "data"), in change-log order
// per row; header X-Cellar-Batch-Size. The answer counts for every event in
// it, as above (a 5xx retries the whole batch), except that a 2xx answer may
// name failed events as Lambda's ReportBatchItemFailures does:
//   {"batchItemFailures": [{"itemIdentifier": "<the event's ce id>"}, ...]}
// Those, with their rows' later events of the batch, are retried (then set
// aside); the rest are done. An empty or null list, or an answer that is not
// such an object, is success; a list naming an event not in the batch (or
// malformed) fails the whole batch. A replay posts batches of one.
// Deliveries are signed as Standard Webhooks when the trigger has secrets
// (webhook_signature.h: webhook-id, webhook-timestamp, webhook-signature).
// https URLs: the receiver's certificate is verified against ca_file (or the
// system's CAs).
// Connections are kept alive and reused (one call at a time each; up to 64
// idle, none idle over 2 s), so a delivery pays no handshake. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "triggers/trigger_config.h"
#include "triggers/trigger_worker.h"

namespace cellar {

// The handler for `config`. InvalidArgument for a URL it cannot use or a
// secret it cannot read.
Result<TriggerHandler> MakeWebhookHandler(const WebhookTriggerConfig& config);

// The batch handler for `config` (batch_size > 1). InvalidArgument as above.
Result<TriggerBatchHandler> MakeWebhookBatchHandler(const WebhookTriggerConfig& config);

inline constexpr char kCloudEventsBatchContentType[] = "application/cloudevents-batch+json";

// The body of a batch POST (documented above). `ids` (may be null) receives
// each event's CloudEvents id, in order.
std::string EncodeWebhookBatch(const KafkaConfig& kafka,
                               const std::vector<const CellEvent*>& events,
                               std::vector<std::string>* ids = nullptr);

// TriggerOptions carrying the webhook's filter, retry and dead-letter policies.
TriggerOptions WebhookTriggerOptions(const WebhookTriggerConfig& config);

}  // namespace cellar
