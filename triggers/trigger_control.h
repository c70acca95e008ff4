// Trigger control: the paused/running state of each named trigger, shared by
// every process that runs it, wherever it runs.
//
// The state lives in table `trigger_control` of the first configured MySQL
// host's database (ClusterConfig::HostDatabase(mysql.hosts[0])):
//   trigger_control(trigger_name PK, paused TINYINT, reason TEXT, updated_at BIGINT micros UTC)
// One row per trigger that was ever paused; no row means running. A trigger's
// name is its consumer group, unique in the cluster, so the name alone keys it.
// `cellar init` and every trigger worker at start create the table
// (idempotently). Running workers poll it (TriggerWorkerOptions::
// control_poll_ms, about once a second): a trigger paused here stops handling
// events in every process within about one poll plus its handler calls in
// flight, and a resumed one continues from its committed offsets (nothing is
// lost; events that were in flight at the pause may be delivered again).
// A dead-letter auto-pause (DeadLetterPolicy::pause_after) writes paused=1
// with its reason here too, so `cellar trigger resume` clears it.
//
// Every call opens its own connection (they are rare operator actions and
// status reads); thread-safe. Errors: Unavailable when MySQL cannot be
// reached, Internal for anything else the adapter reports
// (cells/mysql_client.h); InvalidArgument for a config without MySQL hosts or
// an invalid trigger name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/time.h"
#include "config/cluster_config.h"

namespace cellar {

struct TriggerControlState {
  std::string trigger;
  bool paused = false;
  std::string reason;               // why it was paused (operator text or the DLQ policy's)
  MicrosSinceEpoch updated_at = 0;  // last pause or resume
};

// Creates the table if missing.
Status EnsureTriggerControlTable(const ClusterConfig& config);

// Every stored state (paused or not), ordered by trigger name; empty when no
// trigger was ever paused (or the table does not exist yet).
Result<std::vector<TriggerControlState>> ReadTriggerControl(const ClusterConfig& config);

// The state of one trigger; nullopt when it has no row (running).
Result<std::optional<TriggerControlState>> ReadTriggerControlOf(const ClusterConfig& config,
                                                                const std::string& trigger);

// Marks `trigger` paused with `reason` (creating the table if needed).
// Idempotent; a second pause replaces the reason.
Status PauseTrigger(const ClusterConfig& config, const std::string& trigger,
                    const std::string& reason);

// Marks `trigger` running again (reason cleared). Idempotent: resuming a
// running trigger changes nothing but updated_at.
Status ResumeTrigger(const ClusterConfig& config, const std::string& trigger);

}  // namespace cellar
