#include "triggers/trigger_control.h"

#include "cells/host_topology.h"
#include "cells/mysql_client.h"
#include "triggers/internal/trigger_control_internal.h"
#include "triggers/trigger_config.h"

namespace cellar {
namespace internal {

Result<std::unique_ptr<MysqlConnection>> ConnectControl(const ClusterConfig& config,
                                                        std::string* table) {
  if (config.mysql.hosts.empty())
    return InvalidArgument("trigger control needs a MySQL host in the config");
  const MysqlHostConfig& host = config.mysql.hosts.front();
  *table = QualifiedTable(config.HostDatabase(host), "trigger_control");
  return ConnectCurrentPrimary(config, 0);
}

Status EnsureControlTable(MysqlConnection& conn, const std::string& table) {
  return conn.ExecuteDdl("CREATE TABLE IF NOT EXISTS " + table +
                         " (trigger_name VARCHAR(64) CHARACTER SET ascii NOT NULL PRIMARY KEY,"
                         " paused TINYINT NOT NULL DEFAULT 0,"
                         " reason TEXT NOT NULL,"
                         " updated_at BIGINT NOT NULL DEFAULT 0 COMMENT 'microseconds, UTC')"
                         " ENGINE=InnoDB");
}

Result<std::vector<TriggerControlState>> ReadControl(MysqlConnection& conn,
                                                     const std::string& table) {
  CELLAR_ASSIGN_OR_RETURN(
      auto rows, conn.Query("SELECT trigger_name, paused, reason, updated_at FROM " + table +
                            " ORDER BY trigger_name"));
  std::vector<TriggerControlState> out;
  for (const SqlRow& r : rows)
    out.push_back(TriggerControlState{r.Bytes(0), r.Int(1) != 0, r.Bytes(2), r.Int(3)});
  return out;
}

Status WriteControl(MysqlConnection& conn, const std::string& table, const std::string& trigger,
                    bool paused, const std::string& reason) {
  return conn
      .Execute("INSERT INTO " + table +
                   " (trigger_name, paused, reason, updated_at) VALUES (?, ?, ?, ?)"
                   " ON DUPLICATE KEY UPDATE paused = VALUES(paused), reason = VALUES(reason),"
                   " updated_at = VALUES(updated_at)",
               {trigger, int64_t{paused ? 1 : 0}, reason, NowMicros()})
      .status();
}

}  // namespace internal

namespace {

// A missing table reads as "nothing paused": a cluster initialised before the
// table existed has no paused trigger.
bool IsMissingTable(const Status& s) {
  return s.message().find("(error 1146") != std::string::npos ||  // no such table
         s.message().find("(error 1049") != std::string::npos;    // no such database
}

Status Write(const ClusterConfig& config, const std::string& trigger, bool paused,
             const std::string& reason) {
  if (!IsValidTriggerName(trigger))
    return InvalidArgument("trigger name '" + trigger + "' must match [a-z][a-z0-9_]{0,47}");
  std::string table;
  CELLAR_ASSIGN_OR_RETURN(auto conn, internal::ConnectControl(config, &table));
  CELLAR_RETURN_IF_ERROR(internal::EnsureControlTable(*conn, table));
  return internal::WriteControl(*conn, table, trigger, paused, reason);
}

}  // namespace

Status EnsureTriggerControlTable(const ClusterConfig& config) {
  std::string table;
  CELLAR_ASSIGN_OR_RETURN(auto conn, internal::ConnectControl(config, &table));
  return internal::EnsureControlTable(*conn, table);
}

Result<std::vector<TriggerControlState>> ReadTriggerControl(const ClusterConfig& config) {
  std::string table;
  CELLAR_ASSIGN_OR_RETURN(auto conn, internal::ConnectControl(config, &table));
  auto states = internal::ReadControl(*conn, table);
  if (!states.ok() && IsMissingTable(states.status())) return std::vector<TriggerControlState>();
  return states;
}

Result<std::optional<TriggerControlState>> ReadTriggerControlOf(const ClusterConfig& config,
                                                                const std::string& trigger) {
  CELLAR_ASSIGN_OR_RETURN(auto all, ReadTriggerControl(config));
  for (auto& s : all)
    if (s.trigger == trigger) return std::optional<TriggerControlState>(std::move(s));
  return std::optional<TriggerControlState>();
}

Status PauseTrigger(const ClusterConfig& config, const std::string& trigger,
                    const std::string& reason) {
  return Write(config, trigger, true, reason);
}

Status ResumeTrigger(const ClusterConfig& config, const std::string& trigger) {
  return Write(config, trigger, false, "");
}

}  // namespace cellar
