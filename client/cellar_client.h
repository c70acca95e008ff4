// cellar::Client: the store API over HTTP, for C++ services that talk to
// Cellar worker nodes (cellard / `cellar serve`) instead of MySQL.
//
//   cellar::ClientOptions o;
//   o.endpoints = {"http://10.0.0.5:8080", "http://10.0.0.6:8080"};
//   o.bearer_token = getenv("CELLAR_TOKEN");
//   auto client = cellar::Client::Create(o);          // Result<unique_ptr<Client>>
//   auto put = (*client)->Put("trips", {row, "BASE", 1, {{"city", "SF"}}});
//   auto cell = (*client)->Latest("trips", row, "BASE");
//
// Each operation has the contract of the CellStore method of the same name
// (cells/cell_store.h); errors come back as the same Status codes, decoded
// from the server's error JSON (api/api_wire.h). 401/403 (bad or missing
// token, missing scope) are FailedPrecondition.
//
// Connections: keep-alive connections are pooled per endpoint and reused.
// Endpoints are used round-robin.
//
// Retries: a connection error (refused, reset, timeout) or a 503 answer is
// retried on the next endpoint, up to max_attempts in all, with exponential
// backoff and full jitter (backoff_initial_ms doubling up to backoff_max_ms);
// an endpoint that failed to connect is skipped for a backoff period while
// others remain. This is safe because writes are idempotent by address: a
// retried put of a cell that did commit answers created=false. PutBatch
// retries only the cells that failed with Unavailable. Erase is retried like
// the rest and is idempotent too: a retry after a lost answer finds its own
// tombstone as the latest version and answers created=false with it, so one
// erase writes one tombstone. When every attempt fails, the result is
// Unavailable naming the last error.
//
// Puts sent together: concurrent Put() calls share requests, as the server's
// group commit shares transactions. At most put_requests_in_flight put
// requests run at once. A put that finds none running goes at once, alone
// when nothing else waits (PUT .../<ref_key>); while requests run, puts queue,
// and a free slot sends up to max_puts_per_request of them (one per row) as
// one POST .../cells:batch once no request runs or the waiting puts are at
// least the callers in Put() divided by the slots (client/internal/
// put_coalescer.h). Each put keeps its own answer: a row's puts never share a
// request (the batch commits a row atomically), and a request refused as a
// whole (a bad cell, too large; nothing written) is sent again one put at a
// time. The server counts such requests as batch requests; keep
// max_puts_per_request at or below its limits.max_batch_cells, or every larger
// request is refused and resent. cellar-bench http, 16 threads on 2 cores:
// ~8 puts per request, an HTTP put's CPU 140-190 us against 360-410 us one
// request each, HTTP puts/s 1.4-1.8x. max_puts_per_request 1: each put alone.
//
// Threading: every method is thread-safe; concurrent calls use separate
// connections (up to max_idle_connections_per_endpoint are kept).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/cell_service.h"

namespace cellar {

struct ClientOptions {
  // "http://host:port" or "https://host:port" of each worker node (>= 1).
  std::vector<std::string> endpoints;
  std::string bearer_token;  // empty: send no Authorization header
  int connect_timeout_ms = 2000;
  int request_timeout_ms = 10000;  // read and write timeout of one attempt
  int max_attempts = 6;            // attempts per operation, first one included
  int backoff_initial_ms = 20;
  int backoff_max_ms = 1000;
  int max_idle_connections_per_endpoint = 32;
  // HTTPS: CA bundle to verify servers with (empty: the system's); verify_tls
  // false skips verification (tests with self-signed certificates only).
  std::string ca_cert_file;
  bool verify_tls = true;
  // Concurrent Put() calls sent together (above): puts per request (1: each
  // alone), and requests of Put() running at once (0: two per endpoint).
  int max_puts_per_request = 32;
  int put_requests_in_flight = 0;
};

// An index query over HTTP (GET /v1/<ds>/indexes/<name>; see
// indexes/index_query.h for the semantics and api/index_request.h
// for the wire format).
struct IndexQueryRequest {
  std::string shard_value;          // required: the shard field's value, as text
  std::vector<std::string> where;   // "field op value": = != < <= > >= in (a, b)
  std::vector<std::string> fields;  // fields to return; empty = all
  std::string order_by;             // a field; empty = newest first
  bool descending = true;
  int limit = 100;      // 1..1000
  std::string cursor;   // next_cursor of the previous page
  bool verify = false;  // drop hits whose latest cell no longer matches
  // A put result's `position`: answer only once the index has applied that
  // put (the server waits up to its limits.index_wait, then Unavailable).
  std::string after;
  // Where the server reads the entries: the primary (default) or a replica,
  // stale by its lag unless `after` is given (IndexQuery::read).
  ReadPreference read = ReadPreference::kPrimary;
};

struct IndexQueryHit {
  Uuid row_key;
  std::string column;
  int64_t ref_key = 0;
  nlohmann::json fields;  // field path -> value
};

struct IndexQueryPage {
  std::vector<IndexQueryHit> hits;
  std::string next_cursor;  // empty on the last page
  int version = 0;          // the physical index version that answered
  int dropped_by_verify = 0;
};

// Counters of one client since creation.
struct ClientStats {
  uint64_t requests = 0;  // HTTP attempts sent
  uint64_t retries = 0;   // attempts after the first of an operation
  uint64_t connection_errors = 0;
  uint64_t unavailable_answers = 0;      // 503s received
  uint64_t multi_put_requests = 0;       // requests that carried several Put() calls
  uint64_t coalesced_puts = 0;           // Put() calls sent in those requests
  uint64_t multi_puts_resent_alone = 0;  // of those requests, refused whole and resent one by one
};

class Client : public CellService {
 public:
  // InvalidArgument when there is no endpoint or one is not an http(s)://host:port URL.
  static Result<std::unique_ptr<Client>> Create(const ClientOptions& options);
  ~Client() override;

  [[nodiscard]] Result<PutResult> Put(const std::string& datastore, const CellWrite& cell) override;
  // results[i] belongs to cells[i]. A request rejected as a whole (bad cell,
  // batch too large) fails every cell alike with that error.
  [[nodiscard]] std::vector<Result<PutResult>> PutBatch(
      const std::string& datastore, const std::vector<CellWrite>& cells) override;
  [[nodiscard]] Result<Cell> Get(const std::string& datastore, const Uuid& row,
                                 const std::string& column, int64_t ref_key,
                                 const ReadOptions& read = {}) override;
  [[nodiscard]] Result<Cell> Latest(const std::string& datastore, const Uuid& row,
                                    const std::string& column,
                                    const ReadOptions& read = {}) override;
  [[nodiscard]] Result<std::vector<Cell>> Row(const std::string& datastore, const Uuid& row,
                                              const ReadOptions& read = {}) override;
  [[nodiscard]] Result<std::vector<Cell>> Versions(const std::string& datastore, const Uuid& row,
                                                   const std::string& column,
                                                   const VersionQuery& query,
                                                   const ReadOptions& read = {}) override;
  // The contract of CellStore::Erase (cells/cell_store.h): a column whose
  // latest version is a tombstone answers created=false with it; with
  // expected_ref_key K only version K is erased (Conflict naming the latest
  // version otherwise). DELETE .../<column>?expected_ref_key=K.
  [[nodiscard]] Result<PutResult> Erase(
      const std::string& datastore, const Uuid& row, const std::string& column,
      std::optional<int64_t> expected_ref_key = std::nullopt) override;
  [[nodiscard]] Result<ShardLogPage> ShardLog(const std::string& datastore, uint32_t shard,
                                              uint64_t after_added_id, int limit) override;
  // NotFound for an index the server does not serve; InvalidArgument for a
  // bad query (unknown field, malformed where, missing shard_value).
  [[nodiscard]] Result<IndexQueryPage> QueryIndex(const std::string& datastore,
                                                  const std::string& index,
                                                  const IndexQueryRequest& query);
  // OK when some endpoint answers GET /readyz with 200 (no retries).
  [[nodiscard]] Status Ready();
  // CellService's readiness: Ready().
  [[nodiscard]] Status CheckReady() override { return Ready(); }

  ClientStats stats() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cellar
