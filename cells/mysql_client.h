// MySQL adapter: the only code in Cellar that talks to the MariaDB client
// library (MariaDB Connector/C, libmariadb).
//
// Every statement that carries data is a server-side prepared statement with
// bound parameters (binary protocol); identifiers (database and table names)
// are spliced in only after the caller validated them against the config.
// Each call returns a Status whose code says what happened:
//   Unavailable  the server could not be reached or the connection broke
//                (the connection is then marked broken and must be dropped);
//                or the server's max_prepared_stmt_count is reached by all its
//                connections together (the connection stays usable; retry)
//   Conflict     duplicate key (MySQL error 1062)
//   Aborted      deadlock or lock wait timeout: safe to retry the transaction
//   Internal     anything else (a bug: bad SQL, schema mismatch)
//
// Threading: a MysqlConnection is used by one thread at a time. MysqlHostPool
// is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "config/cluster_config.h"

namespace cellar {

// A bound parameter. std::string is sent as bytes (binary safe).
using SqlParam = std::variant<std::nullptr_t, int64_t, uint64_t, double, std::string>;
// A bound parameter that refers to the caller's bytes instead of owning a
// copy (QueryBorrowed): for statements that carry many large values, such as
// a group commit's bodies.
using SqlParamView = std::variant<std::nullptr_t, int64_t, uint64_t, double, std::string_view>;

// One result row. Every value is held as text, as the server's text protocol
// shows it (integers in decimal, DOUBLEs in the shortest form that reads back
// as the same double, DATETIMEs as "YYYY-MM-DD HH:MM:SS[.ffffff]" to the
// column's decimals), or as raw bytes for strings and BLOBs.
class SqlRow {
 public:
  explicit SqlRow(std::vector<std::optional<std::string>> values) : values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  bool IsNull(size_t i) const { return !values_[i].has_value(); }
  // REQUIRES: i < size(). NULL reads as "" / 0.
  const std::string& Bytes(size_t i) const;
  int64_t Int(size_t i) const;
  uint64_t Uint(size_t i) const;
  double Double(size_t i) const;

 private:
  std::vector<std::optional<std::string>> values_;
};

struct MysqlEndpoint {
  std::string label;  // host name from the config, for messages
  std::string address;
  int port = 3306;
  std::string user;
  std::string password;
  int connect_timeout_ms = 2000;
  int io_timeout_ms = 10000;
  // TLS of the connection (config/cluster_config.h MysqlTlsConfig); files
  // already resolved and checked readable by the config loader.
  MysqlTlsConfig tls;
};

class MysqlConnection {
 public:
  // Connects (over TLS as endpoint.tls says) and sets the session to UTC,
  // utf8mb4 and READ COMMITTED. Unavailable when the server cannot be reached
  // or refuses the login, and when TLS fails (handshake, a certificate that
  // does not verify against tls.ca or name the host): the message names the
  // host, says TLS and the mode, and hints at mysql.tls when the server
  // refuses a plain connection (require_secure_transport);
  // FailedPrecondition when it is not MariaDB 10.5 or newer (the one supported
  // engine: Cellar relies on INSERT ... RETURNING).
  static Result<std::unique_ptr<MysqlConnection>> Connect(const MysqlEndpoint& endpoint);
  ~MysqlConnection();
  MysqlConnection(const MysqlConnection&) = delete;
  MysqlConnection& operator=(const MysqlConnection&) = delete;

  // Runs a statement that returns no rows; returns the affected row count.
  Result<uint64_t> Execute(const std::string& sql, const std::vector<SqlParam>& params = {});
  // Runs a query and returns all its rows.
  Result<std::vector<SqlRow>> Query(const std::string& sql,
                                    const std::vector<SqlParam>& params = {});
  // As Query, with parameters that view the caller's bytes.
  // REQUIRES: every viewed byte stays alive and unchanged until it returns.
  Result<std::vector<SqlRow>> QueryBorrowed(const std::string& sql,
                                            const std::vector<SqlParamView>& params);
  // Runs a non-prepared statement (DDL, SET). REQUIRES: `sql` contains no user data.
  Status ExecuteDdl(const std::string& sql);
  // Runs a non-prepared query (SHOW SLAVE STATUS and other administration)
  // and returns its rows by column name (NULL as ""). REQUIRES: `sql`
  // contains no user data.
  Result<std::vector<std::map<std::string, std::string>>> QueryNamed(const std::string& sql);

  // Starts a transaction. With implicit transactions on, sends nothing: the
  // next statement opens one.
  Status Begin();
  Status Commit();
  // Best effort; a failure marks the connection broken.
  void Rollback();

  // Turns autocommit off for this session (SET autocommit = 0), so that every
  // statement joins the open transaction and COMMIT/ROLLBACK starts the next
  // one: a writer that always ends with Commit() or Rollback() saves the
  // START TRANSACTION round trip. Unavailable/Internal when the SET fails.
  // REQUIRES: no transaction is open.
  Status UseImplicitTransactions();

  // The session's TLS cipher (SHOW SESSION STATUS LIKE 'Ssl_cipher'): "" on
  // a plain connection. Unavailable/Internal when the query fails.
  Result<std::string> TlsCipher();

  // True after an Unavailable error: the caller must drop this connection.
  bool broken() const;
  const MysqlEndpoint& endpoint() const { return endpoint_; }

 private:
  // The libmariadb handle, the statement cache and the reusable bind arrays
  // (mysql_client.cc): kept out of this header so that it names no
  // client-library type.
  struct Impl;
  MysqlConnection(MysqlEndpoint endpoint, std::unique_ptr<Impl> impl);
  template <typename Param>
  Result<std::vector<SqlRow>> Run(const std::string& sql, const std::vector<Param>& params,
                                  uint64_t* affected);

  MysqlEndpoint endpoint_;
  std::unique_ptr<Impl> impl_;
  bool implicit_transactions_ = false;
};

// How many idle connections a MysqlHostPool keeps, and for how long.
struct MysqlPoolLimits {
  // Idle connections kept however long they stay unused.
  int keep_idle = 8;
  // Idle connections beyond keep_idle are closed once unused this long,
  // milliseconds; 0 closes them as they come back. Why not 0: a burst of more
  // concurrent callers than keep_idle would otherwise open and close a
  // connection per call (a connect costs ~5 statements and a server thread).
  int64_t surplus_idle_ms = 60000;
};

// The limits a MysqlConfig sets: pool_size_per_host, pool_idle_timeout.
MysqlPoolLimits PoolLimits(const MysqlConfig& mysql);

// A pool of connections to one MySQL host: to its current primary, which a
// failover changes (Retarget). Connections are reused most recently used
// first, so that the surplus of a past burst is what stays unused and ages
// out. Surplus connections are closed when the pool is next used after they
// expire (no thread of its own).
class MysqlHostPool {
 public:
  // Run on every new connection before the pool hands it out; an error fails
  // Acquire() with it (Unavailable unless the check says otherwise).
  using ConnectCheck = std::function<Status(MysqlConnection&)>;

  MysqlHostPool(MysqlEndpoint endpoint, MysqlPoolLimits limits, ConnectCheck check = {});

  struct Stats {
    uint64_t opened = 0;  // connections opened (and checked) so far
    size_t idle = 0;      // connections idle now
  };
  Stats stats() const;

  // From now on new connections go to `endpoint` and must pass `check`; idle
  // connections are closed, leased ones when they come back. Thread-safe.
  void Retarget(MysqlEndpoint endpoint, ConnectCheck check);

  // A connection checked out of the pool; returned to it on destruction unless broken.
  class Lease {
   public:
    Lease(MysqlHostPool* pool, std::unique_ptr<MysqlConnection> conn, uint64_t generation = 0)
        : pool_(pool), conn_(std::move(conn)), generation_(generation) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease();
    MysqlConnection* operator->() { return conn_.get(); }
    MysqlConnection& operator*() { return *conn_; }

   private:
    MysqlHostPool* pool_;
    std::unique_ptr<MysqlConnection> conn_;
    uint64_t generation_;  // the pool's Retarget count when the connection was opened
  };

  // An idle connection or a new one. Unavailable when the host cannot be reached.
  Result<Lease> Acquire();
  // Where new connections go now.
  MysqlEndpoint endpoint() const;

 private:
  struct Idle {
    std::unique_ptr<MysqlConnection> conn;
    int64_t since_ms = 0;  // steady clock, when it came back
  };
  void Release(std::unique_ptr<MysqlConnection> conn, uint64_t generation);
  // Moves the expired surplus (oldest first) into *closing.
  void TakeExpiredSurplus(int64_t now_ms, std::vector<Idle>* closing) REQUIRES(mu_);

  const MysqlPoolLimits limits_;
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // Retarget() calls so far
  uint64_t opened_ GUARDED_BY(mu_) = 0;
  mutable Mutex mu_;
  MysqlEndpoint endpoint_ GUARDED_BY(mu_);
  ConnectCheck check_ GUARDED_BY(mu_);
  std::deque<Idle> idle_ GUARDED_BY(mu_);  // back: most recently returned
};

// True for a VERSION() string of MariaDB 10.5 or newer, e.g. "10.11.6-MariaDB-0+deb12u1".
bool IsSupportedEngine(const std::string& version);

// "`<db>`.`<table>`". REQUIRES: both names already validated as identifiers.
std::string QualifiedTable(const std::string& database, const std::string& table);

// The row counts of the multi-row statements that carry `rows` rows, largest
// first, each at most `max_rows` and each on a fixed ladder: 1 to
// `exact_rows`, multiples of 8 up to 64, then multiples of `large_step`; at
// most three statements per max_rows rows. Why: a connection prepares every distinct
// statement text it runs, and the server keeps each one (parsing takes a few
// milliseconds for a 500-row statement; a cells INSERT holds about 3.6 KB of
// server memory per row of placeholders). With exact counts a batch writer
// prepares one text per batch size it ever meets, up to max_rows of them per
// connection and shape (120 MB for cells INSERTs of up to 256 rows). On the
// ladder a shape has at most 28 texts for max_rows 500 (exact_rows 8).
// Empty for rows == 0.
// REQUIRES: max_rows >= 1, 8 <= exact_rows <= 64, large_step 8, 16 or 32.
std::vector<size_t> StatementRowCounts(size_t rows, size_t max_rows, size_t exact_rows = 8,
                                       size_t large_step = 32);

// True when StatementRowCounts(rows, ...) is a single statement (rows on the
// ladder and within max_rows); false for rows == 0. Allocates nothing: a
// group committer asks it for many prefixes under its lock.
// REQUIRES: as StatementRowCounts.
bool FitsOneStatement(size_t rows, size_t max_rows, size_t exact_rows = 8, size_t large_step = 32);

// Runs `prefix` + `rows` row texts joined by `separator` + `suffix` on `conn`
// as multi-row statements sized by StatementRowCounts(rows, max_rows), in row
// order; `row(i, params)` appends the i-th row's parameters and returns its
// text. OK once every statement ran; the first failing statement's status
// otherwise (earlier ones ran: the caller's transaction decides).
// REQUIRES: max_rows >= 1.
Status ExecuteRows(MysqlConnection& conn, const std::string& prefix, size_t rows, size_t max_rows,
                   const std::string& separator, const std::string& suffix,
                   const std::function<std::string(size_t, std::vector<SqlParam>&)>& row);

// The endpoint of `host` with credentials and timeouts from the cluster config.
MysqlEndpoint EndpointFor(const ClusterConfig& config, const MysqlHostConfig& host);

}  // namespace cellar
