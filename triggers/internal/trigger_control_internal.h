// The trigger_control table's statements on a given connection, shared by the
// public calls (trigger_control.h) and the worker's poller, which keeps one
// connection open rather than one per poll.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cells/mysql_client.h"
#include "triggers/trigger_control.h"

namespace cellar::internal {

// A new connection to the first MySQL host; *table is the qualified table name.
Result<std::unique_ptr<MysqlConnection>> ConnectControl(const ClusterConfig& config,
                                                        std::string* table);
Status EnsureControlTable(MysqlConnection& conn, const std::string& table);
Result<std::vector<TriggerControlState>> ReadControl(MysqlConnection& conn,
                                                     const std::string& table);
Status WriteControl(MysqlConnection& conn, const std::string& table, const std::string& trigger,
                    bool paused, const std::string& reason);

}  // namespace cellar::internal
