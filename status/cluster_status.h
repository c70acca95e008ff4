// ClusterStatus: one view of a Cellar cluster for `cellar status` - each MySQL
// host up or down, each host stream's relay lag, each trigger's lag and DLQ
// size, each index's versions and lag - gathered from the MySQL hosts and
// Kafka alone (no worker process needs to run, and none is contacted).
//
// Sections are plain structs with one row per thing; a figure that could not
// be read leaves the row in place with `error` set, so one host or Kafka down
// never hides the rest. Figures added later by other parts of issue #17 go in
// the std::optional fields (absent = not known), printed only when set:
//   TriggerRow::paused / paused_reason   trigger pause/resume (control table)
//   *Row::oldest_age_s                   age of the oldest unprocessed event
//   IndexRow::lag                        per-index lag (today: the indexer
//                                        group's lag on the index's datastore)
// To add one: fill it in GatherClusterStatus (cluster_status.cc, one line per
// section), and the JSON and table printers pick it up (status_format.cc).
//
// Thread-compatible: GatherClusterStatus keeps no state between calls.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/time.h"
#include "cells/cell_store.h"

namespace cellar {

struct ReplicaRow {
  std::string server;       // address:port
  bool up = false;          // answered the last topology refresh
  double lag_seconds = -1;  // age of the newest heartbeat it holds; -1: unknown
};

struct HostRow {
  std::string name;     // mysql.hosts[].name
  std::string address;  // its current primary, address:port (cells/host_topology.h)
  uint64_t epoch = 0;   // topology epoch: 1 at `cellar init`, +1 per failover
  std::vector<ReplicaRow> replicas;
  bool up = false;      // a connection answered SELECT VERSION()
  std::string version;  // the server's VERSION() when up
  double latency_ms = 0;
  std::string error;  // why it is down
};

struct RelayStreamRow {  // one per (host, datastore)
  std::string host, datastore;
  uint64_t checkpoint = 0;  // published up to this added_id
  uint64_t head = 0;        // newest added_id of the host log
  uint64_t lag = 0;         // head - checkpoint
  bool owned = false;       // a relay holds the stream's lock
  std::optional<double> oldest_age_s;
  std::string error;
};

struct TriggerRow {
  std::string name, datastore;
  int64_t lag = 0;           // change-log + retry records the group has not committed past
  int64_t dead_letters = 0;  // records in the DLQ topic
  std::optional<bool> paused;
  std::optional<std::string> paused_reason;
  std::optional<double> oldest_age_s;
  std::string error;
};

struct IndexRow {
  std::string name, datastore;
  int serving_version = 0;  // 0: none (never applied, or nothing ready or building)
  std::vector<std::pair<int, std::string>> versions;  // (version, state) of non-retired ones
  std::optional<int64_t> lag;                         // events the index worker has not applied
  std::optional<double> oldest_age_s;
  std::string error;
};

struct KafkaRow {
  bool configured = false;  // kafka.brokers is set
  bool reachable = false;   // a broker answered a metadata request
  std::string error;
};

struct ClusterStatus {
  MicrosSinceEpoch at = 0;  // when gathering started
  std::vector<HostRow> hosts;
  KafkaRow kafka;
  std::vector<RelayStreamRow> relay;
  std::vector<TriggerRow> triggers;
  std::vector<IndexRow> indexes;

  // False when neither a MySQL host nor Kafka answered: nothing was reported.
  bool AnythingReachable() const;
};

// A trigger to report: its name and the datastore it reads.
struct TriggerRef {
  std::string name, datastore;
};

struct ClusterStatusOptions {
  std::vector<TriggerRef> triggers;  // triggers are not registered anywhere: say which
  int kafka_timeout_ms = 3000;       // Kafka's answer to the reachability probe
};

// Gathers the whole view. Never fails: every error is in a row (HostRow::error
// for a host down, KafkaRow::error, each section's error). Indexes are those
// in the registry (on the host owning shard 0); when that host is down the
// indexes section is one row named "*" with the error. With Kafka configured
// but unreachable, trigger and index lags are not read (their rows carry the
// error) so that a call stays short. Takes about kafka_timeout_ms when Kafka
// is down, and the MySQL connect timeout per host that is down.
ClusterStatus GatherClusterStatus(CellStore& store, const ClusterStatusOptions& options);

// The JSON document of `cellar status --json` (keys documented in docs/reference.md,
// CLI section; stable: keys are only ever added).
nlohmann::json ClusterStatusToJson(const ClusterStatus& status);

// The human table of `cellar status`: one block per section.
std::string FormatClusterStatus(const ClusterStatus& status);

}  // namespace cellar
