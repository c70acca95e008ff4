// The cell model: immutable, versioned JSON objects addressed by
// (row_key, column, ref_key) within a datastore.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "base/uuid.h"

namespace cellar {

// What a caller writes. The store assigns added_id and created_at.
struct CellWrite {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;  // >= 0; a newer version has a higher ref_key
  nlohmann::json body;  // must be a JSON object
};

// A stored cell version, as read back.
struct Cell {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;
  nlohmann::json body;              // null for tombstones
  bool tombstone = false;           // written by erase(); hides older versions from latest()
  MicrosSinceEpoch created_at = 0;  // when the store committed it (UTC microseconds)
  uint32_t shard = 0;
  uint64_t added_id = 0;  // shard-local, increasing in commit order

  // "trips/<row>/BASE/3" — used in error messages.
  std::string Address(const std::string& datastore) const;
};

// The outcome of one successful put.
struct PutResult {
  uint32_t shard = 0;
  uint64_t added_id = 0;
  int64_t ref_key = 0;  // the erase tombstone's ref_key for erase()
  MicrosSinceEpoch created_at = 0;
  bool created = false;  // false: the identical cell already existed (a retry)
  // The cell's position token (cells/log_position.h), for an index query's
  // and a replica read's `after`, naming the host that committed it: set by
  // CellStore and the HTTP API (so in the client's results).
  std::string position;
};

// Bounds of a versions() read.
struct VersionQuery {
  std::optional<int64_t> max_ref;         // only ref_key <= max_ref
  std::optional<int64_t> min_ref;         // only ref_key >= min_ref
  std::optional<MicrosSinceEpoch> as_of;  // only versions created at or before as_of
  std::optional<MicrosSinceEpoch> since;  // only versions created at or after since
  int limit = 100;                        // 1..10000
};

// OK, or InvalidArgument naming the bound that is wrong: limit outside
// 1..10000, min_ref above max_ref, since after as_of.
[[nodiscard]] Status ValidateVersionQuery(const VersionQuery& q);

// Where a read goes (get, latest, row, versions).
enum class ReadPreference {
  kPrimary,  // the host's primary: every acknowledged write (the default)
  // One of the host's replicas (the primary when none answers): takes load
  // off the primary, stale by at most the replica's lag (cellar status,
  // cellar_mysql_replica_lag_seconds) unless `after` is given.
  kReplica,
};
// "primary" / "replica".
const char* ReadPreferenceName(ReadPreference preference);

struct ReadOptions {
  ReadPreference preference = ReadPreference::kPrimary;
  // A position token a write returned (PutResult::position): a replica read
  // first waits until its replica holds that write (up to limits.index_wait,
  // then it reads from the primary), so a caller reads its own writes. Empty:
  // no wait. InvalidArgument when it is not a token of this datastore.
  std::string after;
};

// One page of a shard's log (shard_log()).
struct ShardLogPage {
  std::vector<Cell> cells;  // in added_id order, all columns, tombstones and expired included
  uint64_t next_after = 0;  // pass as after_added_id to continue (== input when empty)
};

std::string CellAddress(const std::string& datastore, const Uuid& row, const std::string& column,
                        int64_t ref_key);

// Cell as JSON: {"row_key","column","ref_key","body","tombstone","created_at"(RFC 3339),
// "shard","added_id"} — the shape the CLI and HTTP API print.
nlohmann::json CellToJson(const Cell& cell);

// A cell read with its body as text, for readers that pass the body on as
// JSON text (the HTTP API) and so need no document of it.
struct CellText {
  Cell cell;              // cell.body is null
  std::string body_json;  // the body as compact JSON text ("" for a tombstone)
};

// The compact JSON text of CellToJson (dump(-1, ' ', false, replace), keys in
// nlohmann's sorted order) with `body_json` printed as the body ("null" when
// empty), without building a document: the same bytes as printing
// CellToJson(cell) where cell.body is the document of body_json.
std::string CellJsonText(const Cell& cell, std::string_view body_json);
// A read Cell as CellText: its document printed as the body.
CellText ToCellText(Cell cell);
std::vector<CellText> ToCellTexts(std::vector<Cell> cells);
// The JSON array of CellJsonText of each cell: the same bytes as printing an
// array of CellToJson.
std::string CellsJsonText(const std::vector<CellText>& cells);

}  // namespace cellar
