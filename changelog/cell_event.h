// CellEvent: one committed cell version as published on the change log.
//
// Kafka record:
//   topic     <kafka.topic_prefix>.<datastore>.cells
//   partition shard % kafka.partitions (a shard's cells stay in added_id order)
//   key       row_key, canonical UUID text (a row's versions stay in order)
//   value     JSON object:
//     {"datastore":"trips","shard":7,"added_id":1042,
//      "row_key":"6b82bf47-eed5-4707-991b-3cf64b41a40d","column":"BASE","ref_key":3,
//      "created_at":"2026-11-22T02:07:47.716308Z","tombstone":false,
//      "body":{...}}                      // the cell's JSON object; null for tombstones
//     "body_omitted":true replaces the body (then null) when its JSON text is
//     larger than kafka.max_event_body_bytes: read it with get(row, column, ref_key).
//   headers   CloudEvents v1.0, binary content mode (the value above is the
//             event's data), the same attributes a webhook request carries as
//             ce-* HTTP headers (CloudEventHeaders below):
//     ce_specversion 1.0
//     ce_id          <datastore>:<shard>:<added_id>   unique per cell version; the idempotency key
//     ce_source      cellar://<topic_prefix>/<datastore>
//     ce_type        cellar.cell.written, or cellar.cell.erased for a tombstone
//     ce_time        the cell's created_at, RFC 3339 UTC with microseconds
//     ce_subject     <row_key>/<column>/<ref_key>
//     content-type   application/json
//   The exactly-once relay adds cellar-stream and cellar-added-id
//   (kafka/internal/published_tail.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "config/cluster_config.h"

namespace cellar {

struct CellEvent {
  std::string datastore;
  Cell cell;  // cell.body is null when tombstone or body_omitted, or decoded as published
  bool body_omitted = false;
  // The record's value as read from the change log, for consumers that
  // forward it as published: set by DecodeCellEventAsPublished (then
  // cell.body is null: the body was never parsed) or by such a consumer
  // itself. Empty otherwise.
  std::string published_json = {};
};

// The cell's CloudEvents subject: "<row_key>/<column>/<ref_key>".
std::string CellSubject(const Cell& cell);

// "<prefix>.<datastore>.cells"
std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore);
// shard % partitions.
int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard);

// One protocol header: name and value.
struct EventHeader {
  std::string name;
  std::string value;
  friend bool operator==(const EventHeader&, const EventHeader&) = default;
};

enum class CloudEventBinding {
  kKafka,  // ce_<attribute> headers plus content-type (CloudEvents Kafka protocol binding)
  kHttp,   // ce-<attribute> headers; the request's Content-Type is the caller's
};

// The CloudEvents attributes of one change-log event as headers of
// `binding` (documented above), in the order listed there.
std::vector<EventHeader> CloudEventHeaders(CloudEventBinding binding, const KafkaConfig& kafka,
                                           const std::string& datastore, const Cell& cell);

// The JSON value of the Kafka record (documented above).
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell, int64_t max_body_bytes);
// The same bytes from the body already printed as compact JSON text
// (cell.body.dump(), e.g. HostLogPage::body_texts); cell.body is not read.
// REQUIRES: `body` is that text ("" or anything for a tombstone: not used).
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell, std::string_view body,
                            int64_t max_body_bytes);
// The same bytes built through a JSON document: the reference the direct
// EncodeCellEvent is tested against. Not for production use (slower).
std::string EncodeCellEventViaDocument(const std::string& datastore, const Cell& cell,
                                       int64_t max_body_bytes);
// Parses a record value. InvalidArgument naming the missing or mistyped field.
Result<CellEvent> DecodeCellEvent(std::string_view value);
// The same fields and errors, without the body: cell.body stays null and
// published_json holds `value`, for a consumer that forwards the record as
// published (a webhook) and needs no document of the body. The body is read
// past without building anything (about a third of DecodeCellEvent's cost
// for a trip cell).
Result<CellEvent> DecodeCellEventAsPublished(std::string_view value);

}  // namespace cellar
