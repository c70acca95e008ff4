#include "status/cluster_status.h"

#include <chrono>
#include <map>
#include <set>

#include "cells/host_topology.h"
#include "cells/mysql_client.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "changelog/relay.h"
#include "indexes/index_catalog.h"
#include "triggers/trigger_admin.h"
#include "triggers/trigger_control.h"

namespace cellar {
namespace {

std::vector<HostRow> GatherHosts(CellStore& store) {
  const ClusterConfig& cfg = store.config();
  std::vector<HostRow> out;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = cfg.mysql.hosts[h];
    HostRow row;
    row.name = host.name;
    const HostTopology topology = store.topology().Refresh(h);
    row.address = topology.primary.Label();
    row.epoch = topology.epoch;
    for (const auto& r : store.topology().Replicas(h))
      row.replicas.push_back(ReplicaRow{r.server, r.reachable, r.lag_seconds});
    auto t0 = std::chrono::steady_clock::now();
    // A query proves the host answers now. A pooled connection that broke
    // since the last round (--watch over a server restart) fails once and is
    // dropped; the second try connects afresh.
    auto ask = [&]() -> Result<std::vector<SqlRow>> {
      t0 = std::chrono::steady_clock::now();
      CELLAR_ASSIGN_OR_RETURN(auto lease, store.PoolForHost(h).Acquire());
      return lease->Query("SELECT VERSION()");
    };
    auto rows = ask();
    if (!rows.ok() && rows.status().code() == StatusCode::kUnavailable) rows = ask();
    if (!rows.ok()) {
      row.error = rows.status().ToString();
    } else {
      row.up = true;
      if (!rows->empty()) row.version = (*rows)[0].Bytes(0);
      row.latency_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    out.push_back(row);
  }
  return out;
}

std::vector<RelayStreamRow> GatherRelay(CellStore& store, const std::vector<HostRow>& hosts) {
  std::map<std::string, const HostRow*> by_name;
  for (const auto& h : hosts) by_name[h.name] = &h;
  std::vector<RelayStreamRow> out;
  for (const auto& s : ReadRelayStatus(store)) {
    RelayStreamRow r;
    r.host = s.host;
    r.datastore = s.datastore;
    r.checkpoint = s.checkpoint;
    r.head = s.head;
    r.lag = s.lag;
    r.owned = s.owned;
    r.error = s.error;
    if (s.error.empty()) r.oldest_age_s = OldestUnpublishedAgeSeconds(s, NowMicros());
    // A host found down above is reported as such, whatever the second try said.
    if (r.error.empty() && by_name.count(s.host) && !by_name[s.host]->up)
      r.error = by_name[s.host]->error;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TriggerRow> GatherTriggers(const ClusterConfig& cfg, const KafkaRow& kafka,
                                       const std::vector<TriggerRef>& refs) {
  std::vector<TriggerRow> out;
  // Paused state from the control table (triggers/trigger_control.h); a
  // trigger paused there but not named by the caller still gets a row.
  auto control = ReadTriggerControl(cfg);
  std::map<std::string, TriggerControlState> control_by_name;
  if (control.ok())
    for (auto& c : *control) control_by_name[c.trigger] = c;
  auto set_pause = [&](TriggerRow& row) {
    if (!control.ok()) return;  // unknown: left unset, shown as such
    auto it = control_by_name.find(row.name);
    row.paused = it != control_by_name.end() && it->second.paused;
    if (row.paused.value_or(false)) row.paused_reason = it->second.reason;
  };
  std::set<std::string> named;
  for (const auto& t : refs) {
    TriggerRow row;
    row.name = t.name;
    row.datastore = t.datastore;
    named.insert(t.name);
    set_pause(row);
    if (!kafka.reachable) {
      row.error = kafka.configured ? kafka.error : "no Kafka configured";
    } else if (auto lag = ReadTriggerLag(cfg, t.datastore, t.name); !lag.ok()) {
      row.error = lag.status().ToString();
    } else {
      row.lag = lag->total_lag;
      row.dead_letters = lag->dead_letters;
      row.oldest_age_s = lag->oldest_unprocessed_age_seconds;
    }
    out.push_back(std::move(row));
  }
  for (const auto& [name, c] : control_by_name) {
    if (!c.paused || named.count(name)) continue;
    TriggerRow row;
    row.name = name;
    set_pause(row);
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<IndexRow> GatherIndexes(CellStore& store, const KafkaRow& kafka) {
  const ClusterConfig& cfg = store.config();
  IndexCatalog catalog(&store);
  std::vector<IndexRow> out;
  std::map<std::string, Result<GroupLag>> lag_by_datastore;
  for (const auto& ds : cfg.datastores) {
    auto versions = catalog.WritableOver(ds.name);
    if (!versions.ok()) {
      IndexRow row;
      row.name = "*";
      row.error = versions.status().ToString();
      out.push_back(std::move(row));
      return out;  // the registry is on one host: every datastore would say the same
    }
    std::map<std::string, IndexRow> rows;  // by index name, sorted
    for (const auto& ic : *versions) {
      IndexRow& row = rows[ic.version.table];
      row.name = ic.version.table;
      row.datastore = ds.name;
      row.versions.emplace_back(ic.version.version, std::string(IndexStateName(ic.version.state)));
    }
    if (rows.empty()) continue;
    if (kafka.reachable && !lag_by_datastore.count(ds.name))
      lag_by_datastore.emplace(ds.name, ReadIndexerLag(cfg, ds.name));
    for (auto& [name, row] : rows) {
      // Serving: the newest ready version, else the newest building one
      // (IndexCatalog::Serving), from the versions read above.
      for (const auto& [v, state] : row.versions)
        if (state == "ready") row.serving_version = v;
      if (row.serving_version == 0 && !row.versions.empty())
        row.serving_version = row.versions.back().first;
      if (!kafka.reachable) {
        row.error = kafka.error;  // empty without Kafka: no worker, no lag
      } else if (const auto& lag = lag_by_datastore.at(ds.name); !lag.ok()) {
        row.error = lag.status().ToString();
      } else {
        row.lag = lag->total;
        row.oldest_age_s = lag->OldestAgeSeconds(NowMicros() / 1000);
      }
      out.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace

bool ClusterStatus::AnythingReachable() const {
  for (const auto& h : hosts)
    if (h.up) return true;
  return kafka.reachable;
}

ClusterStatus GatherClusterStatus(CellStore& store, const ClusterStatusOptions& options) {
  const ClusterConfig& cfg = store.config();
  ClusterStatus st;
  st.at = NowMicros();
  st.hosts = GatherHosts(store);
  st.kafka.configured = !cfg.kafka.brokers.empty();
  if (st.kafka.configured) {
    Status probe = ProbeKafka(cfg, options.kafka_timeout_ms);
    st.kafka.reachable = probe.ok();
    if (!probe.ok()) st.kafka.error = probe.ToString();
  }
  st.relay = GatherRelay(store, st.hosts);
  st.triggers = GatherTriggers(cfg, st.kafka, options.triggers);
  st.indexes = GatherIndexes(store, st.kafka);
  return st;
}

}  // namespace cellar
