#include "cells/mysql_client.h"

#include <mysql.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include "cells/internal/mysql_binding.h"
#include "cells/sql_call_counts.h"

namespace cellar {
namespace {

// Client error codes (CR_*) and server errors that mean "the connection is gone".
bool IsConnectionError(int code) {
  switch (code) {
    case 2002:  // CR_CONNECTION_ERROR
    case 2003:  // CR_CONN_HOST_ERROR
    case 2005:  // CR_UNKNOWN_HOST
    case 2006:  // CR_SERVER_GONE_ERROR
    case 2013:  // CR_SERVER_LOST
    case 2055:  // CR_SERVER_LOST_EXTENDED
    case 1927:  // ER_CONNECTION_KILLED
    case 1053:  // ER_SERVER_SHUTDOWN
    case 2026:  // CR_SSL_CONNECTION_ERROR
    // ER_OPTION_PREVENTS_STATEMENT: a write on a read_only server, i.e. one
    // that was demoted (a failover, cells/host_topology.h): the connection
    // must go and the next one to the host's current primary.
    case 1290:
      return true;
    default:
      return code >= 2000 && code < 3000 && code != 2014 && code != 2031 && code != 2034;
  }
}

// mysql_library_init() is not thread-safe; mysql_init() calls it when it was
// not called, so the first connections of two threads would race.
void InitClientLibrary() {
  static std::once_flag once;
  std::call_once(once, [] { mysql_library_init(0, nullptr, nullptr); });
}

}  // namespace

const std::string& SqlRow::Bytes(size_t i) const {
  static const std::string kEmpty;
  return values_[i] ? *values_[i] : kEmpty;
}
int64_t SqlRow::Int(size_t i) const {
  return values_[i] ? std::strtoll(values_[i]->c_str(), nullptr, 10) : 0;
}
uint64_t SqlRow::Uint(size_t i) const {
  return values_[i] ? std::strtoull(values_[i]->c_str(), nullptr, 10) : 0;
}
double SqlRow::Double(size_t i) const {
  return values_[i] ? std::strtod(values_[i]->c_str(), nullptr) : 0;
}

std::string QualifiedTable(const std::string& database, const std::string& table) {
  return "`" + database + "`.`" + table + "`";
}

namespace {
// The largest ladder count <= n (n >= 1).
size_t LadderFloor(size_t n, size_t exact_rows, size_t large_step) {
  if (n <= std::max<size_t>(exact_rows, 8)) return n;
  if (n <= 64) return n / 8 * 8;
  return n / large_step * large_step;
}
}  // namespace

std::vector<size_t> StatementRowCounts(size_t rows, size_t max_rows, size_t exact_rows,
                                       size_t large_step) {
  std::vector<size_t> counts;
  const size_t cap = LadderFloor(std::max<size_t>(1, max_rows), exact_rows, large_step);
  while (rows > 0) {
    const size_t n = LadderFloor(std::min(rows, cap), exact_rows, large_step);
    counts.push_back(n);
    rows -= n;
  }
  return counts;
}

bool FitsOneStatement(size_t rows, size_t max_rows, size_t exact_rows, size_t large_step) {
  const size_t cap = LadderFloor(std::max<size_t>(1, max_rows), exact_rows, large_step);
  return rows >= 1 && rows <= cap && LadderFloor(rows, exact_rows, large_step) == rows;
}

Status ExecuteRows(MysqlConnection& conn, const std::string& prefix, size_t rows, size_t max_rows,
                   const std::string& separator, const std::string& suffix,
                   const std::function<std::string(size_t, std::vector<SqlParam>&)>& row) {
  size_t start = 0;
  for (size_t count : StatementRowCounts(rows, max_rows)) {
    std::string sql = prefix;
    std::vector<SqlParam> params;
    for (size_t i = start; i < start + count; ++i) {
      if (i > start) sql += separator;
      sql += row(i, params);
    }
    sql += suffix;
    CELLAR_RETURN_IF_ERROR(conn.Execute(sql, params).status());
    start += count;
  }
  return Status::Ok();
}

MysqlEndpoint EndpointFor(const ClusterConfig& config, const MysqlHostConfig& host) {
  MysqlEndpoint e;
  e.label = host.name;
  e.address = host.address;
  e.port = host.port;
  e.user = config.mysql.user;
  e.password = config.MysqlPassword();
  e.connect_timeout_ms = config.mysql.connect_timeout_ms;
  e.io_timeout_ms = config.mysql.io_timeout_ms;
  e.tls = host.tls;
  return e;
}

struct MysqlConnection::Impl {
  explicit Impl(std::string host_label) : label(std::move(host_label)) {}
  ~Impl() {
    for (auto& [sql, cached] : statements) mysql_stmt_close(cached.statement);
    if (mysql) mysql_close(mysql);
  }

  // The Status for a failure `code` (`text` from the client library) while
  // doing `what`; marks the connection broken for connection errors.
  Status Fail(const std::string& what, unsigned code_in, const char* text) {
    const int code = static_cast<int>(code_in);
    last_error_code = code;
    std::string msg = what + " on MySQL host " + label + ": " + (text ? text : "") + " (error " +
                      std::to_string(code) + ")";
    if (IsConnectionError(code)) {
      broken = true;
      return Unavailable(std::move(msg));
    }
    if (code == kStatementLimitReached)
      return Unavailable(std::move(msg) +
                         "; the server's max_prepared_stmt_count counts every connection's "
                         "statements: retry (they free up as connections evict or close), or "
                         "raise it");
    if (code == 1062) return Conflict(std::move(msg));
    if (code == 1213 || code == 1205 || code == 3572) return Aborted(std::move(msg));
    return Internal(std::move(msg));
  }
  Status FailConnection(const std::string& what) {
    return Fail(what, mysql_errno(mysql), mysql_error(mysql));
  }
  Status FailStatement(const std::string& what, MYSQL_STMT* stmt) {
    return Fail(what, mysql_stmt_errno(stmt), mysql_stmt_error(stmt));
  }
  Status BrokenStatus() const {
    return Unavailable("connection to MySQL host " + label + " is broken");
  }

  // Runs a statement without preparing it; appends its rows (as text) to
  // `rows` when it returns any and `rows` is not null.
  Status RunText(const std::string& what, const std::string& sql, std::vector<SqlRow>* rows,
                 std::vector<std::string>* columns = nullptr) {
    if (broken) return BrokenStatus();
    CountSqlStatement();
    if (mysql_real_query(mysql, sql.data(), sql.size()) != 0) return FailConnection(what);
    if (mysql_field_count(mysql) == 0) return Status::Ok();
    MYSQL_RES* res = mysql_store_result(mysql);
    if (!res) return FailConnection(what);
    const unsigned n = mysql_num_fields(res);
    if (columns) {
      const MYSQL_FIELD* fields = mysql_fetch_fields(res);
      for (unsigned c = 0; c < n; ++c) columns->emplace_back(fields[c].name);
    }
    while (MYSQL_ROW row = mysql_fetch_row(res)) {
      if (!rows) continue;
      const unsigned long* lengths = mysql_fetch_lengths(res);
      std::vector<std::optional<std::string>> values;
      values.reserve(n);
      for (unsigned c = 0; c < n; ++c) {
        if (row[c])
          values.emplace_back(std::string(row[c], lengths[c]));
        else
          values.emplace_back(std::nullopt);
      }
      rows->emplace_back(std::move(values));
    }
    mysql_free_result(res);
    return Status::Ok();
  }

  // The cached statement for `sql`, prepared on first use. At the server's
  // max_prepared_stmt_count (shared by all its connections) it closes the
  // older half of this connection's statements and prepares once more.
  Result<MYSQL_STMT*> Prepare(const std::string& sql) {
    if (broken) return BrokenStatus();
    auto it = statements.find(sql);
    if (it != statements.end()) {
      lru.splice(lru.begin(), lru, it->second.lru);  // most recently used first
      return it->second.statement;
    }
    Result<MYSQL_STMT*> prepared = PrepareUncached(sql);
    if (!prepared.ok() && !broken && last_error_code == kStatementLimitReached &&
        !statements.empty()) {
      // The server's limit counts all connections: give back the older half
      // of ours (at least one) and try once more.
      EvictLeastRecentlyUsed(statements.size() - statements.size() / 2);
      prepared = PrepareUncached(sql);
    }
    if (!prepared.ok()) return prepared.status();
    // Bound the server-side statements per connection: evict the least recently used.
    if (statements.size() >= kMaxPreparedStatements)
      EvictLeastRecentlyUsed(statements.size() - kMaxPreparedStatements + 1);
    lru.push_front(sql);
    statements.emplace(sql, CachedStatement{*prepared, lru.begin()});
    return *prepared;
  }

  Result<MYSQL_STMT*> PrepareUncached(const std::string& sql) {
    MYSQL_STMT* stmt = mysql_stmt_init(mysql);
    if (!stmt) return FailConnection("prepare");
    if (mysql_stmt_prepare(stmt, sql.data(), sql.size()) != 0) {
      Status s = FailStatement("prepare", stmt);
      mysql_stmt_close(stmt);
      return s;
    }
    return stmt;
  }

  void EvictLeastRecentlyUsed(size_t n) {
    for (; n > 0 && !lru.empty(); --n) {
      auto it = statements.find(lru.back());
      mysql_stmt_close(it->second.statement);  // closes the server-side statement
      statements.erase(it);
      lru.pop_back();
    }
  }

  // Binds `params` to `stmt` (reusing this connection's bind array) and sends
  // the long ones ahead of the execution.
  template <typename Param>
  Status BindParams(MYSQL_STMT* stmt, const std::vector<Param>& params) {
    const unsigned long expected = mysql_stmt_param_count(stmt);
    if (expected != params.size())
      return Internal("statement on MySQL host " + label + " has " + std::to_string(expected) +
                      " placeholders but was given " + std::to_string(params.size()) +
                      " parameters");
    if (params.empty()) return Status::Ok();
    internal::FillParamBinds(params, &param_binds);
    if (mysql_stmt_bind_param(stmt, param_binds.data()) != 0 ||
        !internal::SendLongParams(stmt, param_binds))
      return FailStatement("statement", stmt);
    return Status::Ok();
  }

  // Reads every row of the executed `stmt` (the cached statement of `sql`)
  // into `rows`. A statement whose rows ended in an error (the server sends
  // an INSERT ... RETURNING's metadata before a row fails, e.g. a NULL in a
  // NOT NULL column) is closed and dropped from the cache: libmariadb
  // (3.3) leaves it in a state where mysql_stmt_free_result() or the next
  // execution waits for result packets that never come, until the read
  // timeout breaks the connection.
  Status ReadRows(const std::string& sql, MYSQL_STMT* stmt, std::vector<SqlRow>* rows) {
    if (result_reader.Read(stmt, rows)) return Status::Ok();
    Status s = FailStatement("query", stmt);
    Forget(sql);
    return s;
  }

  // Closes the cached statement of `sql`, if any.
  void Forget(const std::string& sql) {
    auto it = statements.find(sql);
    if (it == statements.end()) return;
    mysql_stmt_close(it->second.statement);
    lru.erase(it->second.lru);
    statements.erase(it);
  }

  static constexpr size_t kMaxPreparedStatements = 1024;
  static constexpr int kStatementLimitReached = 1461;  // ER_MAX_PREPARED_STMT_COUNT_REACHED

  MYSQL* mysql = nullptr;
  std::string label;  // the host's name, for messages
  bool broken = false;
  int last_error_code = 0;  // of the last failure (Fail)
  struct CachedStatement {
    MYSQL_STMT* statement;
    std::list<std::string>::iterator lru;
  };
  std::unordered_map<std::string, CachedStatement> statements;
  std::list<std::string> lru;  // SQL texts, most recently used first
  // Reused by every execution: a group commit binds thousands of parameters.
  std::vector<MYSQL_BIND> param_binds;
  internal::ResultReader result_reader;
};

MysqlConnection::MysqlConnection(MysqlEndpoint endpoint, std::unique_ptr<Impl> impl)
    : endpoint_(std::move(endpoint)), impl_(std::move(impl)) {}

MysqlConnection::~MysqlConnection() = default;

bool MysqlConnection::broken() const { return impl_->broken; }

bool IsSupportedEngine(const std::string& version) {
  if (version.find("MariaDB") == std::string::npos) return false;
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > 10 || (major == 10 && minor >= 5);
}

namespace {

// libmariadb options for `tls`: MYSQL_OPT_SSL_ENFORCE makes the handshake
// fail unless TLS is on; libmariadb checks the server's chain whenever a CA is
// set (so `required` passes none) and its name against the address with
// MYSQL_OPT_SSL_VERIFY_SERVER_CERT.
void SetTlsOptions(const MysqlTlsConfig& tls, MYSQL* mysql) {
  if (!tls.enabled()) return;
  const my_bool enforce = 1;
  mysql_optionsv(mysql, MYSQL_OPT_SSL_ENFORCE, &enforce);
  if (tls.mode != MysqlTlsMode::kRequired && !tls.ca.empty())
    mysql_optionsv(mysql, MYSQL_OPT_SSL_CA, tls.ca.c_str());
  if (!tls.cert.empty()) mysql_optionsv(mysql, MYSQL_OPT_SSL_CERT, tls.cert.c_str());
  if (!tls.key.empty()) mysql_optionsv(mysql, MYSQL_OPT_SSL_KEY, tls.key.c_str());
  const my_bool verify = tls.mode == MysqlTlsMode::kVerifyIdentity;
  mysql_optionsv(mysql, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
}

// What a failed connect should tell the operator beyond the driver's text.
std::string ConnectFailure(const MysqlEndpoint& e, const std::string& where,
                           const std::string& what) {
  if (e.tls.enabled())
    return where + " unreachable over TLS (mode " + MysqlTlsModeName(e.tls.mode) +
           (e.tls.ca.empty() || e.tls.mode == MysqlTlsMode::kRequired ? "" : ", ca " + e.tls.ca) +
           "): " + what;
  std::string msg = where + " unreachable: " + what;
  // MariaDB refuses a plain login under require_secure_transport=ON with
  // "Access denied" (1045), the same error as a wrong password.
  if (what.find("(error 1045)") != std::string::npos ||
      what.find("secure transport") != std::string::npos)
    msg +=
        "; if the server requires TLS (require_secure_transport), set mysql.tls or "
        "mysql.hosts[].tls in the config";
  return msg;
}

}  // namespace

Result<std::unique_ptr<MysqlConnection>> MysqlConnection::Connect(const MysqlEndpoint& e) {
  const std::string where =
      "MySQL host " + e.label + " (" + e.address + ":" + std::to_string(e.port) + ")";
  InitClientLibrary();
  auto impl = std::make_unique<Impl>(e.label);
  impl->mysql = mysql_init(nullptr);
  if (!impl->mysql) return Unavailable(ConnectFailure(e, where, "out of memory (mysql_init)"));
  MYSQL* m = impl->mysql;
  const unsigned connect_s =
      static_cast<unsigned>(std::max(1, (e.connect_timeout_ms + 999) / 1000));
  const unsigned io_s = static_cast<unsigned>(std::max(1, (e.io_timeout_ms + 999) / 1000));
  const my_bool reconnect = 0;  // a silent reconnect would lose the session's transaction
  mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
  mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &io_s);
  mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &io_s);
  mysql_optionsv(m, MYSQL_OPT_RECONNECT, &reconnect);
  mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  SetTlsOptions(e.tls, m);
  if (!mysql_real_connect(m, e.address.c_str(), e.user.c_str(), e.password.c_str(), nullptr,
                          static_cast<unsigned>(e.port), nullptr, CLIENT_MULTI_RESULTS))
    return Unavailable(ConnectFailure(
        e, where, std::string(mysql_error(m)) + " (error " + std::to_string(mysql_errno(m)) + ")"));
  std::vector<SqlRow> version_rows;
  for (const std::string& sql :
       {std::string("SET time_zone = '+00:00'"),
        std::string("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        // A lock wait must end with an error (1205, retryable) before the
        // client's read timeout drops the connection.
        "SET SESSION innodb_lock_wait_timeout = " +
            std::to_string(std::max(1, e.io_timeout_ms / 1000 - 1)),
        std::string("SELECT VERSION()")}) {
    Status s = impl->RunText("session set-up", sql, &version_rows);
    if (!s.ok()) return Unavailable(ConnectFailure(e, where, s.message()));
  }
  const std::string version =
      version_rows.empty() || version_rows[0].size() == 0 ? "" : version_rows[0].Bytes(0);
  // INSERT ... RETURNING (10.5) gives every inserted cell its added_id in one
  // round trip; MySQL has no equivalent, and no test could run it here.
  if (!IsSupportedEngine(version))
    return FailedPrecondition(where + " runs '" + version +
                              "': Cellar supports MariaDB 10.5 or newer only");
  return std::unique_ptr<MysqlConnection>(new MysqlConnection(e, std::move(impl)));
}

Result<std::vector<std::map<std::string, std::string>>> MysqlConnection::QueryNamed(
    const std::string& sql) {
  std::vector<SqlRow> rows;
  std::vector<std::string> columns;
  CELLAR_RETURN_IF_ERROR(impl_->RunText("query", sql, &rows, &columns));
  std::vector<std::map<std::string, std::string>> out;
  for (const SqlRow& row : rows) {
    std::map<std::string, std::string>& named = out.emplace_back();
    for (size_t c = 0; c < columns.size() && c < row.size(); ++c) named[columns[c]] = row.Bytes(c);
  }
  return out;
}

Result<std::string> MysqlConnection::TlsCipher() {
  std::vector<SqlRow> rows;
  CELLAR_RETURN_IF_ERROR(impl_->RunText("query", "SHOW SESSION STATUS LIKE 'Ssl_cipher'", &rows));
  return rows.empty() || rows[0].size() < 2 ? std::string() : rows[0].Bytes(1);
}

template <typename Param>
Result<std::vector<SqlRow>> MysqlConnection::Run(const std::string& sql,
                                                 const std::vector<Param>& params,
                                                 uint64_t* affected) {
  CELLAR_ASSIGN_OR_RETURN(MYSQL_STMT * stmt, impl_->Prepare(sql));
  CELLAR_RETURN_IF_ERROR(impl_->BindParams(stmt, params));
  CountSqlStatement();
  if (mysql_stmt_execute(stmt) != 0) return impl_->FailStatement("statement", stmt);
  std::vector<SqlRow> rows;
  if (mysql_stmt_field_count(stmt) > 0) {
    CELLAR_RETURN_IF_ERROR(impl_->ReadRows(sql, stmt, &rows));
  } else if (affected) {
    *affected = mysql_stmt_affected_rows(stmt);
  }
  return rows;
}

Result<uint64_t> MysqlConnection::Execute(const std::string& sql,
                                          const std::vector<SqlParam>& params) {
  uint64_t affected = 0;
  CELLAR_RETURN_IF_ERROR(Run(sql, params, &affected).status());
  return affected;
}

Result<std::vector<SqlRow>> MysqlConnection::Query(const std::string& sql,
                                                   const std::vector<SqlParam>& params) {
  return Run(sql, params, nullptr);
}

Result<std::vector<SqlRow>> MysqlConnection::QueryBorrowed(
    const std::string& sql, const std::vector<SqlParamView>& params) {
  return Run(sql, params, nullptr);
}

Status MysqlConnection::ExecuteDdl(const std::string& sql) {
  return impl_->RunText("statement", sql, nullptr);
}

// Transactions are driven with plain statements whose replies are checked,
// so that a COMMIT that failed (server gone, connection killed) is reported.
Status MysqlConnection::Begin() {
  if (implicit_transactions_) return Status::Ok();
  return impl_->RunText("begin", "START TRANSACTION", nullptr);
}

Status MysqlConnection::UseImplicitTransactions() {
  CELLAR_RETURN_IF_ERROR(ExecuteDdl("SET autocommit = 0"));
  implicit_transactions_ = true;
  return Status::Ok();
}

Status MysqlConnection::Commit() {
  CELLAR_RETURN_IF_ERROR(impl_->RunText("commit", "COMMIT", nullptr));
  CountSqlCommit();
  return Status::Ok();
}

void MysqlConnection::Rollback() {
  Status s = impl_->RunText("rollback", "ROLLBACK", nullptr);
  if (!s.ok()) impl_->broken = true;
}

namespace {
int64_t SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

MysqlPoolLimits PoolLimits(const MysqlConfig& mysql) {
  return MysqlPoolLimits{mysql.pool_size_per_host, mysql.pool_idle_timeout_ms};
}

MysqlHostPool::MysqlHostPool(MysqlEndpoint endpoint, MysqlPoolLimits limits, ConnectCheck check)
    : limits_(limits), endpoint_(std::move(endpoint)), check_(std::move(check)) {}

MysqlHostPool::Lease::~Lease() {
  if (pool_ && conn_) pool_->Release(std::move(conn_), generation_);
}

void MysqlHostPool::Retarget(MysqlEndpoint endpoint, ConnectCheck check) {
  std::deque<Idle> dropped;  // closed after the lock is released
  MutexLock lock(&mu_);
  endpoint_ = std::move(endpoint);
  check_ = std::move(check);
  ++generation_;
  dropped.swap(idle_);
}

MysqlEndpoint MysqlHostPool::endpoint() const {
  MutexLock lock(&mu_);
  return endpoint_;
}

MysqlHostPool::Stats MysqlHostPool::stats() const {
  MutexLock lock(&mu_);
  return Stats{opened_, idle_.size()};
}

void MysqlHostPool::TakeExpiredSurplus(int64_t now_ms, std::vector<Idle>* closing) {
  while (static_cast<int>(idle_.size()) > limits_.keep_idle &&
         now_ms - idle_.front().since_ms >= limits_.surplus_idle_ms) {
    closing->push_back(std::move(idle_.front()));
    idle_.pop_front();
  }
}

Result<MysqlHostPool::Lease> MysqlHostPool::Acquire() {
  std::vector<Idle> closing;  // closed after the lock is released
  MysqlEndpoint endpoint;
  ConnectCheck check;
  uint64_t generation;
  {
    MutexLock lock(&mu_);
    TakeExpiredSurplus(SteadyMillis(), &closing);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back().conn);
      idle_.pop_back();
      return Lease(this, std::move(c), generation_);
    }
    endpoint = endpoint_;
    check = check_;
    generation = generation_;
  }
  CELLAR_ASSIGN_OR_RETURN(auto conn, MysqlConnection::Connect(endpoint));
  if (check) CELLAR_RETURN_IF_ERROR(check(*conn));
  {
    MutexLock lock(&mu_);
    ++opened_;
  }
  return Lease(this, std::move(conn), generation);
}

void MysqlHostPool::Release(std::unique_ptr<MysqlConnection> conn, uint64_t generation) {
  std::vector<Idle> closing;  // closed after the lock is released
  std::deque<Idle> dropped;
  MutexLock lock(&mu_);
  if (generation != generation_) {
    closing.push_back(Idle{std::move(conn)});  // opened before a Retarget
    return;
  }
  if (conn->broken()) {
    // The server went away or restarted: the idle connections opened before
    // are as stale as this one. Drop them all, so that a retry (CellStore's
    // WithShard) connects afresh instead of drawing another stale connection.
    dropped.swap(idle_);
    closing.push_back(Idle{std::move(conn)});
    return;
  }
  const int64_t now = SteadyMillis();
  idle_.push_back(Idle{std::move(conn), now});
  TakeExpiredSurplus(now, &closing);
}

}  // namespace cellar
