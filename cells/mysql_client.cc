#include "cells/mysql_client.h"

#include <cppconn/exception.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
      return true;
    default:
      return code >= 2000 && code < 3000 && code != 2014 && code != 2031 && code != 2034;
  }
}

sql::mysql::MySQL_Driver* Driver() {
  // get_mysql_driver_instance() is not thread-safe on its first call.
  static sql::mysql::MySQL_Driver* driver = sql::mysql::get_mysql_driver_instance();
  return driver;
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

MysqlConnection::MysqlConnection(MysqlEndpoint endpoint, std::unique_ptr<sql::Connection> conn)
    : endpoint_(std::move(endpoint)), conn_(std::move(conn)) {}

MysqlConnection::~MysqlConnection() {
  statements_.clear();  // statements reference the connection: drop them first
  try {
    conn_.reset();
  } catch (...) {
  }
}

bool IsSupportedEngine(const std::string& version) {
  if (version.find("MariaDB") == std::string::npos) return false;
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > 10 || (major == 10 && minor >= 5);
}

namespace {

// Connector/C++ 1.1 (built on libmariadb here) options for `tls`: sslEnforce
// makes the handshake fail unless TLS is on; libmariadb checks the server's
// chain whenever a CA is set (so `required` passes none) and its name against
// the address with sslVerify (MYSQL_OPT_SSL_VERIFY_SERVER_CERT).
void SetTlsOptions(const MysqlTlsConfig& tls, sql::ConnectOptionsMap* opts) {
  if (!tls.enabled()) return;
  (*opts)["sslEnforce"] = true;
  if (tls.mode != MysqlTlsMode::kRequired && !tls.ca.empty())
    (*opts)["sslCA"] = sql::SQLString(tls.ca);
  if (!tls.cert.empty()) (*opts)["sslCert"] = sql::SQLString(tls.cert);
  if (!tls.key.empty()) (*opts)["sslKey"] = sql::SQLString(tls.key);
  (*opts)["sslVerify"] = tls.mode == MysqlTlsMode::kVerifyIdentity;
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
  try {
    sql::ConnectOptionsMap opts;
    opts["hostName"] = sql::SQLString(e.address);
    opts["port"] = e.port;
    opts["userName"] = sql::SQLString(e.user);
    opts["password"] = sql::SQLString(e.password);
    opts["OPT_CONNECT_TIMEOUT"] = std::max(1, (e.connect_timeout_ms + 999) / 1000);
    opts["OPT_READ_TIMEOUT"] = std::max(1, (e.io_timeout_ms + 999) / 1000);
    opts["OPT_WRITE_TIMEOUT"] = std::max(1, (e.io_timeout_ms + 999) / 1000);
    opts["OPT_RECONNECT"] = false;
    opts["OPT_CHARSET_NAME"] = sql::SQLString("utf8mb4");
    SetTlsOptions(e.tls, &opts);
    std::unique_ptr<sql::Connection> conn(Driver()->connect(opts));
    std::unique_ptr<sql::Statement> st(conn->createStatement());
    st->execute("SET time_zone = '+00:00'");
    st->execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    // A lock wait must end with an error (1205, retryable) before the client's
    // read timeout drops the connection.
    st->execute("SET SESSION innodb_lock_wait_timeout = " +
                std::to_string(std::max(1, e.io_timeout_ms / 1000 - 1)));
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SELECT VERSION()"));
    std::string version = rs->next() ? rs->getString(1).asStdString() : "";
    rs.reset();
    st.reset();
    // INSERT ... RETURNING (10.5) gives every inserted cell its added_id in
    // one round trip; MySQL has no equivalent, and no test could run it here.
    if (!IsSupportedEngine(version))
      return FailedPrecondition(where + " runs '" + version +
                                "': Cellar supports MariaDB 10.5 or newer only");
    auto c = std::unique_ptr<MysqlConnection>(new MysqlConnection(e, std::move(conn)));
    return c;
  } catch (const sql::SQLException& ex) {
    return Unavailable(ConnectFailure(
        e, where, std::string(ex.what()) + " (error " + std::to_string(ex.getErrorCode()) + ")"));
  } catch (const std::exception& ex) {
    return Unavailable(ConnectFailure(e, where, ex.what()));
  }
}

Result<std::string> MysqlConnection::TlsCipher() {
  std::string cipher;
  CELLAR_RETURN_IF_ERROR(Guard("query", [&] {
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    std::unique_ptr<sql::ResultSet> rs(st->executeQuery("SHOW SESSION STATUS LIKE 'Ssl_cipher'"));
    if (rs->next()) cipher = rs->getString(2).asStdString();
  }));
  return cipher;
}

template <typename Fn>
Status MysqlConnection::Guard(const std::string& what, Fn&& fn) {
  if (broken_) return Unavailable("connection to MySQL host " + endpoint_.label + " is broken");
  try {
    fn();
    return Status::Ok();
  } catch (const sql::SQLException& ex) {
    const int code = ex.getErrorCode();
    last_error_code_ = code;
    std::string msg = what + " on MySQL host " + endpoint_.label + ": " + ex.what() + " (error " +
                      std::to_string(code) + ")";
    if (IsConnectionError(code)) {
      broken_ = true;
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
  } catch (const std::exception& ex) {
    broken_ = true;  // state unknown: do not reuse
    return Internal(what + " on MySQL host " + endpoint_.label + ": " + ex.what());
  }
}

Result<sql::PreparedStatement*> MysqlConnection::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);  // most recently used first
    return it->second.statement.get();
  }
  sql::PreparedStatement* raw = nullptr;
  auto prepare = [&] { return Guard("prepare", [&] { raw = conn_->prepareStatement(sql); }); };
  Status prepared = prepare();
  if (!prepared.ok() && !broken_ && last_error_code_ == kStatementLimitReached &&
      !statements_.empty()) {
    // The server's limit counts all connections: give back the older half of
    // ours (at least one) and try once more.
    EvictLeastRecentlyUsed(statements_.size() - statements_.size() / 2);
    prepared = prepare();
  }
  CELLAR_RETURN_IF_ERROR(prepared);
  // Bound the server-side statements per connection: evict the least recently used.
  if (statements_.size() >= kMaxPreparedStatements)
    EvictLeastRecentlyUsed(statements_.size() - kMaxPreparedStatements + 1);
  lru_.push_front(sql);
  statements_.emplace(sql,
                      CachedStatement{std::unique_ptr<sql::PreparedStatement>(raw), lru_.begin()});
  return raw;
}

void MysqlConnection::EvictLeastRecentlyUsed(size_t n) {
  for (; n > 0 && !lru_.empty(); --n) {
    statements_.erase(lru_.back());  // closes the server-side statement
    lru_.pop_back();
  }
}

namespace {
template <typename Param>
void Bind(sql::PreparedStatement* ps, const std::vector<Param>& params) {
  unsigned i = 1;
  for (const auto& p : params) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::nullptr_t>)
            ps->setNull(i, 0);
          else if constexpr (std::is_same_v<T, int64_t>)
            ps->setInt64(i, v);
          else if constexpr (std::is_same_v<T, uint64_t>)
            ps->setUInt64(i, v);
          else if constexpr (std::is_same_v<T, double>)
            ps->setDouble(i, v);
          else  // std::string or std::string_view: bytes, binary safe
            ps->setString(i, sql::SQLString(v.data(), v.size()));
        },
        p);
    ++i;
  }
}
}  // namespace

Result<uint64_t> MysqlConnection::Execute(const std::string& sql,
                                          const std::vector<SqlParam>& params) {
  CELLAR_ASSIGN_OR_RETURN(sql::PreparedStatement * ps, Prepare(sql));
  uint64_t affected = 0;
  CELLAR_RETURN_IF_ERROR(Guard("statement", [&] {
    Bind(ps, params);
    affected = static_cast<uint64_t>(ps->executeUpdate());
  }));
  return affected;
}

template <typename Param>
Result<std::vector<SqlRow>> MysqlConnection::QueryWith(const std::string& sql,
                                                       const std::vector<Param>& params) {
  CELLAR_ASSIGN_OR_RETURN(sql::PreparedStatement * ps, Prepare(sql));
  std::vector<SqlRow> rows;
  CELLAR_RETURN_IF_ERROR(Guard("query", [&] {
    Bind(ps, params);
    std::unique_ptr<sql::ResultSet> rs(ps->executeQuery());
    const unsigned n = rs->getMetaData()->getColumnCount();
    while (rs->next()) {
      std::vector<std::optional<std::string>> values;
      values.reserve(n);
      for (unsigned c = 1; c <= n; ++c) {
        sql::SQLString s = rs->getString(c);
        if (rs->wasNull())
          values.emplace_back(std::nullopt);
        else
          values.emplace_back(s.asStdString());
      }
      rows.emplace_back(std::move(values));
    }
  }));
  return rows;
}

Result<std::vector<SqlRow>> MysqlConnection::Query(const std::string& sql,
                                                   const std::vector<SqlParam>& params) {
  return QueryWith(sql, params);
}

Result<std::vector<SqlRow>> MysqlConnection::QueryBorrowed(
    const std::string& sql, const std::vector<SqlParamView>& params) {
  return QueryWith(sql, params);
}

Status MysqlConnection::ExecuteDdl(const std::string& sql) {
  return Guard("statement", [&] {
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute(sql);
  });
}

// Transactions are driven with plain statements: Connector/C++ 1.1's
// Connection::commit(), rollback() and setAutoCommit() ignore the server's
// reply, so a COMMIT that failed (server gone, connection killed) would look
// successful and an acknowledged write could be lost.
Status MysqlConnection::Begin() {
  if (implicit_transactions_) return Status::Ok();
  return Guard("begin", [&] {
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute("START TRANSACTION");
  });
}

Status MysqlConnection::UseImplicitTransactions() {
  CELLAR_RETURN_IF_ERROR(ExecuteDdl("SET autocommit = 0"));
  implicit_transactions_ = true;
  return Status::Ok();
}

Status MysqlConnection::Commit() {
  return Guard("commit", [&] {
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute("COMMIT");
  });
}

void MysqlConnection::Rollback() {
  Status s = Guard("rollback", [&] {
    std::unique_ptr<sql::Statement> st(conn_->createStatement());
    st->execute("ROLLBACK");
  });
  if (!s.ok()) broken_ = true;
}

MysqlHostPool::MysqlHostPool(MysqlEndpoint endpoint, int max_idle)
    : endpoint_(std::move(endpoint)), max_idle_(max_idle) {}

MysqlHostPool::Lease::~Lease() {
  if (pool_ && conn_) pool_->Release(std::move(conn_));
}

Result<MysqlHostPool::Lease> MysqlHostPool::Acquire() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(c));
    }
  }
  CELLAR_ASSIGN_OR_RETURN(auto conn, MysqlConnection::Connect(endpoint_));
  return Lease(this, std::move(conn));
}

void MysqlHostPool::Release(std::unique_ptr<MysqlConnection> conn) {
  std::vector<std::unique_ptr<MysqlConnection>> dropped;  // closed after the lock is released
  MutexLock lock(&mu_);
  if (conn->broken()) {
    // The server went away or restarted: the idle connections opened before
    // are as stale as this one. Drop them all, so that a retry (CellStore's
    // WithShard) connects afresh instead of drawing another stale connection.
    dropped.swap(idle_);
    return;
  }
  if (static_cast<int>(idle_.size()) < max_idle_) idle_.push_back(std::move(conn));
}

}  // namespace cellar
