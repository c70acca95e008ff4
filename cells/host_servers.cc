#include "cells/host_servers.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "base/number_text.h"

namespace cellar {
namespace {

// How often a fence looks whether the connections it killed have ended (a
// commit in progress ends within milliseconds).
constexpr std::chrono::milliseconds kKilledConnectionPoll{5};

// A string literal for the few administration statements MariaDB does not
// prepare (CHANGE MASTER TO): quotes and backslashes escaped.
std::string Literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

int64_t IntOr(const std::map<std::string, std::string>& row, const std::string& key,
              int64_t fallback) {
  auto it = row.find(key);
  if (it == row.end() || it->second.empty()) return fallback;
  auto v = ParseDecimalInteger<int64_t>(it->second);
  return v ? *v : fallback;
}

std::string Get(const std::map<std::string, std::string>& row, const std::string& key) {
  auto it = row.find(key);
  return it == row.end() ? "" : it->second;
}

}  // namespace

Result<GtidPosition> GtidPosition::Parse(const std::string& text) {
  GtidPosition p;
  p.text_ = text;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string part = text.substr(start, comma - start);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\n')) part.erase(0, 1);
    const size_t d1 = part.find('-'), d2 = part.rfind('-');
    auto domain =
        d1 == std::string::npos ? std::nullopt : ParseDecimalInteger<uint32_t>(part.substr(0, d1));
    auto seq = d2 == std::string::npos || d2 == d1
                   ? std::nullopt
                   : ParseDecimalInteger<uint64_t>(part.substr(d2 + 1));
    if (!domain.has_value() || !seq.has_value())
      return InvalidArgument("not a GTID position: '" + text + "'");
    auto server =
        d2 == d1 ? std::nullopt : ParseDecimalInteger<uint32_t>(part.substr(d1 + 1, d2 - d1 - 1));
    if (!server.has_value()) return InvalidArgument("not a GTID position: '" + text + "'");
    const uint32_t d = domain.value();
    p.seq_[d] = std::max(p.seq_[d], seq.value());
    p.by_server_[{d, server.value()}] = seq.value();
    start = comma + 1;
  }
  return p;
}

bool GtidPosition::Covers(const GtidPosition& other) const {
  for (const auto& [domain, seq] : other.seq_) {
    auto it = seq_.find(domain);
    if (it == seq_.end() || it->second < seq) return false;
  }
  return true;
}

bool GtidPosition::HistoryHolds(const GtidPosition& other) const {
  for (const auto& [key, seq] : other.by_server_) {
    auto it = by_server_.find(key);
    if (it == by_server_.end() || it->second < seq) return false;
  }
  return true;
}

Result<ServerState> InspectServer(MysqlConnection& conn, const ClusterConfig& config,
                                  const MysqlHostConfig& host, const MysqlServerConfig& server) {
  ServerState s;
  s.server = server;
  CELLAR_ASSIGN_OR_RETURN(
      auto vars, conn.QueryNamed("SELECT @@read_only AS ro, @@gtid_binlog_pos AS binlog_pos,"
                                 " @@gtid_binlog_state AS binlog_state,"
                                 " @@gtid_current_pos AS current_pos,"
                                 " @@rpl_semi_sync_master_enabled AS ss_enabled,"
                                 " @@rpl_semi_sync_master_wait_point AS wait_point,"
                                 " @@rpl_semi_sync_master_timeout AS ss_timeout,"
                                 " CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) AS now_us"));
  if (vars.empty()) return Internal("no answer from server " + server.Label());
  s.read_only = IntOr(vars[0], "ro", 0) != 0;
  s.gtid_binlog_pos = Get(vars[0], "binlog_pos");
  s.gtid_binlog_state = Get(vars[0], "binlog_state");
  s.gtid_current_pos = Get(vars[0], "current_pos");
  s.semi_sync_master_enabled = IntOr(vars[0], "ss_enabled", 0) != 0;
  s.semi_sync_wait_point = Get(vars[0], "wait_point");
  s.semi_sync_timeout_ms = IntOr(vars[0], "ss_timeout", 0);
  s.now = IntOr(vars[0], "now_us", 0);
  CELLAR_ASSIGN_OR_RETURN(
      auto status,
      conn.QueryNamed("SHOW GLOBAL STATUS WHERE Variable_name IN"
                      " ('Rpl_semi_sync_master_status', 'Rpl_semi_sync_master_no_tx')"));
  for (const auto& row : status) {
    if (Get(row, "Variable_name") == "Rpl_semi_sync_master_status")
      s.semi_sync_master_on = Get(row, "Value") == "ON";
    else
      s.semi_sync_no_tx = IntOr(row, "Value", 0);
  }
  CELLAR_ASSIGN_OR_RETURN(auto slave, conn.QueryNamed("SHOW SLAVE STATUS"));
  if (!slave.empty()) {
    const auto& r = slave[0];
    s.master = Get(r, "Master_Host") + ":" + Get(r, "Master_Port");
    s.io_running = Get(r, "Slave_IO_Running") == "Yes";
    s.io_connecting = Get(r, "Slave_IO_Running") == "Connecting";
    s.sql_running = Get(r, "Slave_SQL_Running") == "Yes";
    s.gtid_io_pos = Get(r, "Gtid_IO_Pos");
    s.lag_seconds = IntOr(r, "Seconds_Behind_Master", -1);
    s.replication_error = Get(r, "Last_IO_Error");
    if (s.replication_error.empty()) s.replication_error = Get(r, "Last_SQL_Error");
  }
  const std::string db = config.HostDatabase(host);
  CELLAR_ASSIGN_OR_RETURN(s.topology, ReadServerTopology(conn, db));
  CELLAR_ASSIGN_OR_RETURN(s.heartbeat, ReadSemiSyncHeartbeat(conn, db));
  return s;
}

std::vector<ServerState> InspectHost(const ClusterConfig& config, const MysqlHostConfig& host) {
  std::vector<ServerState> out;
  for (const MysqlServerConfig& server : host.Servers()) {
    auto conn = MysqlConnection::Connect(ServerEndpoint(config, host, server));
    Result<ServerState> s = conn.ok() ? InspectServer(**conn, config, host, server)
                                      : Result<ServerState>(conn.status());
    if (s.ok()) {
      out.push_back(std::move(s).value());
    } else {
      ServerState down;
      down.server = server;
      down.error = s.status().message();
      out.push_back(std::move(down));
    }
  }
  return out;
}

Status ReplicateFrom(MysqlConnection& conn, const ClusterConfig& config,
                     const MysqlServerConfig& primary, bool former_primary) {
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("STOP SLAVE"));
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(
      "CHANGE MASTER TO MASTER_HOST = " + Literal(primary.address) + ", MASTER_PORT = " +
      std::to_string(primary.port) + ", MASTER_USER = " + Literal(config.mysql.user) +
      ", MASTER_PASSWORD = " + Literal(config.MysqlPassword()) +
      ", MASTER_CONNECT_RETRY = 1, MASTER_HEARTBEAT_PERIOD = 1, MASTER_USE_GTID = " +
      (former_primary ? "current_pos" : "slave_pos")));
  return conn.ExecuteDdl("START SLAVE");
}

Status StopReplicating(MysqlConnection& conn) {
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("STOP SLAVE"));
  return conn.ExecuteDdl("RESET SLAVE ALL");
}

Status OpenAsPrimary(MysqlConnection& conn, const MysqlHostConfig& host) {
  if (host.replication == ReplicationMode::kSemiSync && !host.replicas.empty()) {
    CELLAR_RETURN_IF_ERROR(
        conn.ExecuteDdl("SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC"));
    // With no replica connected, commit at once (asynchronously) rather than
    // stall every host write for the timeout first; the semi-sync heartbeat
    // records it, so a later emergency failover knows loss is possible.
    CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET GLOBAL rpl_semi_sync_master_wait_no_slave = OFF"));
    CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET GLOBAL rpl_semi_sync_master_enabled = ON"));
  }
  return conn.ExecuteDdl("SET GLOBAL read_only = OFF");
}

Status FenceServer(MysqlConnection& conn, const ClusterConfig& config, const MysqlHostConfig& host,
                   int64_t timeout_ms) {
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET GLOBAL read_only = ON"));
  // Not in the binlog: fence rows are this server's own (write_fence.h).
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET SESSION sql_log_bin = 0"));
  auto deleted =
      conn.Execute("DELETE FROM " + QualifiedTable(config.HostDatabase(host), "write_fence"));
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl("SET SESSION sql_log_bin = 1"));
  if (!deleted.ok() && deleted.status().message().find("(error 1146)") == std::string::npos &&
      deleted.status().message().find("(error 1049)") == std::string::npos)
    return deleted.status();
  CELLAR_ASSIGN_OR_RETURN(
      auto ids, conn.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?"
                           " AND ID <> CONNECTION_ID() AND COMMAND NOT LIKE 'Binlog Dump%'",
                           {SqlParam(config.mysql.user)}));
  std::string killed;  // "id,id,..."
  for (const SqlRow& row : ids) {
    // A connection that ended meanwhile is not an error (1094: unknown thread).
    Status st = conn.ExecuteDdl("KILL CONNECTION " + std::to_string(row.Uint(0)));
    if (!st.ok() && st.message().find("(error 1094)") == std::string::npos) return st;
    if (!killed.empty()) killed += ',';
    killed += std::to_string(row.Uint(0));
  }
  if (killed.empty()) return Status::Ok();
  // KILL returns before its connection has ended: one in the middle of a
  // commit still writes it to the binlog (its client sees a lost connection),
  // and read_only does not stop Cellar's user from starting one. Until every
  // killed connection is gone, the binlog may still grow.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    CELLAR_ASSIGN_OR_RETURN(auto left,
                            conn.Query("SELECT GROUP_CONCAT(ID) FROM information_schema.PROCESSLIST"
                                       " WHERE FIND_IN_SET(ID, ?)",
                                       {SqlParam(killed)}));
    if (left.empty() || left[0].IsNull(0)) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded("connections " + left[0].Bytes(0) + " of user " + config.mysql.user +
                              " on server " + conn.endpoint().address + ":" +
                              std::to_string(conn.endpoint().port) + " still run " +
                              std::to_string(timeout_ms) + " ms after they were killed");
    std::this_thread::sleep_for(kKilledConnectionPoll);
  }
}

Status WaitForPosition(MysqlConnection& conn, const std::string& position, int64_t timeout_ms) {
  // In slices shorter than a statement's io timeout: a longer wait would end
  // in a dropped connection, not in this deadline.
  const int64_t slice_ms = std::max<int64_t>(100, conn.endpoint().io_timeout_ms - 500);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - std::chrono::steady_clock::now())
                             .count();
    CELLAR_ASSIGN_OR_RETURN(
        auto rows,
        conn.Query("SELECT MASTER_GTID_WAIT(?, ?)",
                   {SqlParam(position),
                    SqlParam(static_cast<double>(std::clamp<int64_t>(left, 0, slice_ms)) / 1000)}));
    if (!rows.empty() && !rows[0].IsNull(0) && rows[0].Int(0) == 0) return Status::Ok();
    if (left <= slice_ms)
      return DeadlineExceeded("server " + conn.endpoint().address + ":" +
                              std::to_string(conn.endpoint().port) +
                              " did not reach GTID position " + position + " within " +
                              std::to_string(timeout_ms) + " ms");
  }
}

}  // namespace cellar
