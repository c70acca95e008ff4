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
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "cells/cell.h"
#include "config/cluster_config.h"

namespace cellar {

struct CellEvent {
  std::string datastore;
  Cell cell;  // cell.body is null when tombstone or body_omitted
  bool body_omitted = false;
};

// "<prefix>.<datastore>.cells"
std::string ChangeLogTopic(const KafkaConfig& kafka, const std::string& datastore);
// shard % partitions.
int32_t ChangeLogPartition(const KafkaConfig& kafka, uint32_t shard);

// The JSON value of the Kafka record (documented above).
std::string EncodeCellEvent(const std::string& datastore, const Cell& cell, int64_t max_body_bytes);
// The same bytes built through a JSON document: the reference the direct
// EncodeCellEvent is tested against. Not for production use (slower).
std::string EncodeCellEventViaDocument(const std::string& datastore, const Cell& cell,
                                       int64_t max_body_bytes);
// Parses a record value. InvalidArgument naming the missing or mistyped field.
Result<CellEvent> DecodeCellEvent(std::string_view value);

}  // namespace cellar
