#include "cells/host_topology.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "base/log.h"
#include "base/metrics.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "cells/shard_placement.h"

namespace cellar {
namespace {

// The host database or the topology table does not exist yet (a replica
// before `cellar init`, or a cluster never initialised).
bool IsMissingTable(const Status& st) {
  return st.message().find("(error 1146)") != std::string::npos ||
         st.message().find("(error 1049)") != std::string::npos;
}

}  // namespace

// Read here with the topology, each refresh: one statement, and a missing
// table (no move yet) answers like a missing topology table.
Result<std::vector<ShardPlacementRow>> ReadShardPlacement(MysqlConnection& conn,
                                                          const std::string& database) {
  std::vector<ShardPlacementRow> rows;
  auto found = conn.Query("SELECT shard, host, move_seq FROM " +
                          QualifiedTable(database, "shard_placement") + " ORDER BY shard");
  if (!found.ok()) {
    if (IsMissingTable(found.status())) return rows;
    return found.status();
  }
  for (const SqlRow& r : *found)
    rows.push_back({static_cast<uint32_t>(r.Uint(0)), r.Bytes(1), r.Uint(2)});
  return rows;
}

std::string CreateTopologySql(const std::string& database) {
  return "CREATE TABLE IF NOT EXISTS " + QualifiedTable(database, "topology") +
         " (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
         " epoch BIGINT UNSIGNED NOT NULL,"
         " primary_server VARCHAR(300) NOT NULL,"
         " changed_at BIGINT NOT NULL) ENGINE=InnoDB";
}

Result<HostTopology> ReadServerTopology(MysqlConnection& conn, const std::string& database) {
  auto rows = conn.Query("SELECT epoch, primary_server FROM " +
                         QualifiedTable(database, "topology") + " WHERE id = 1");
  if (!rows.ok()) {
    if (IsMissingTable(rows.status())) return HostTopology{};
    return rows.status();
  }
  HostTopology t;
  if (rows->empty()) return t;
  t.epoch = (*rows)[0].Uint(0);
  const std::string& label = (*rows)[0].Bytes(1);
  const size_t colon = label.rfind(':');
  if (colon == std::string::npos)
    return Internal("topology row of " + database + " names no server: '" + label + "'");
  t.primary.address = label.substr(0, colon);
  t.primary.port = std::atoi(label.c_str() + colon + 1);
  return t;
}

Status WriteServerTopology(MysqlConnection& conn, const std::string& database,
                           const HostTopology& topology) {
  CELLAR_RETURN_IF_ERROR(conn.ExecuteDdl(CreateTopologySql(database)));
  auto r = conn.Execute("INSERT INTO " + QualifiedTable(database, "topology") +
                            " (id, epoch, primary_server, changed_at) VALUES (1, ?, ?, ?)"
                            " ON DUPLICATE KEY UPDATE epoch = VALUES(epoch),"
                            " primary_server = VALUES(primary_server),"
                            " changed_at = VALUES(changed_at)",
                        {SqlParam(topology.epoch), SqlParam(topology.primary.Label()),
                         SqlParam(static_cast<int64_t>(NowMicros()))});
  return r.status();
}

std::string CreateSemiSyncHeartbeatSql(const std::string& database) {
  return "CREATE TABLE IF NOT EXISTS " + QualifiedTable(database, "semi_sync_heartbeat") +
         " (id TINYINT UNSIGNED NOT NULL PRIMARY KEY,"
         " at_us BIGINT NOT NULL COMMENT 'the primary clock, microseconds since the epoch',"
         " semi_sync_on TINYINT NOT NULL,"
         " timeout_ms BIGINT NOT NULL,"
         " epoch BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB";
}

Status WriteSemiSyncHeartbeat(MysqlConnection& conn, const std::string& database, uint64_t epoch) {
  // The status is read by the statement itself, before its own commit waits
  // for an ack: ON means no fallback had happened when it ran.
  auto r = conn.Execute("REPLACE INTO " + QualifiedTable(database, "semi_sync_heartbeat") +
                            " (id, at_us, semi_sync_on, timeout_ms, epoch)"
                            " SELECT 1, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED),"
                            " IF(VARIABLE_VALUE = 'ON', 1, 0), @@rpl_semi_sync_master_timeout, ?"
                            " FROM information_schema.GLOBAL_STATUS"
                            " WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'",
                        {SqlParam(epoch)});
  return r.status();
}

Result<SemiSyncHeartbeat> ReadSemiSyncHeartbeat(MysqlConnection& conn,
                                                const std::string& database) {
  auto rows = conn.Query("SELECT at_us, semi_sync_on, timeout_ms, epoch FROM " +
                         QualifiedTable(database, "semi_sync_heartbeat") + " WHERE id = 1");
  if (!rows.ok()) {
    if (IsMissingTable(rows.status())) return SemiSyncHeartbeat{};
    return rows.status();
  }
  SemiSyncHeartbeat h;
  if (rows->empty()) return h;
  h.at = (*rows)[0].Int(0);
  h.semi_sync_on = (*rows)[0].Int(1) != 0;
  h.timeout_ms = (*rows)[0].Int(2);
  h.epoch = (*rows)[0].Uint(3);
  return h;
}

Status VerifyPrimary(MysqlConnection& conn, const ClusterConfig& config,
                     const MysqlHostConfig& host, const HostTopology& topology) {
  const std::string server = conn.endpoint().address + ":" + std::to_string(conn.endpoint().port);
  const std::string who = "server " + server + " of host " + host.name;
  CELLAR_ASSIGN_OR_RETURN(auto rows,
                          conn.Query("SELECT @@read_only, @@rpl_semi_sync_master_enabled,"
                                     " @@rpl_semi_sync_master_wait_point"));
  if (rows.empty()) return Internal(who + ": no answer to the role query");
  if (rows[0].Int(0) != 0)
    return Unavailable(who + " is read_only: not the primary (a failover demoted it, or it " +
                       "restarted and awaits `cellar host failover " + host.name + "`)");
  if (!host.replicas.empty() && host.replication == ReplicationMode::kSemiSync &&
      (rows[0].Int(1) == 0 || rows[0].Bytes(2) != "AFTER_SYNC"))
    return Unavailable(who + " does not run lossless semi-synchronous replication (" +
                       "rpl_semi_sync_master_enabled=" + std::to_string(rows[0].Int(1)) +
                       ", rpl_semi_sync_master_wait_point=" + rows[0].Bytes(2) +
                       "): refused as primary of a semi_sync host; set both (" +
                       "AFTER_SYNC) or declare `replication: async`");
  CELLAR_ASSIGN_OR_RETURN(HostTopology held, ReadServerTopology(conn, config.HostDatabase(host)));
  // A host without replicas has one server, however a config names it: only
  // the epoch counts.
  const bool named = !host.replicas.empty();
  if (held.epoch != topology.epoch || (named && !(held.primary == topology.primary)))
    return Unavailable(who + " holds topology epoch " + std::to_string(held.epoch) + " (primary " +
                       (held.epoch ? held.primary.Label() : "none") + "), this process expects " +
                       std::to_string(topology.epoch) + " (primary " + topology.primary.Label() +
                       ")");
  if (named && held.epoch != 0 &&
      !(held.primary.address == conn.endpoint().address &&
        held.primary.port == conn.endpoint().port))
    return Unavailable(who + " is not the primary at epoch " + std::to_string(held.epoch) + " (" +
                       held.primary.Label() + " is)");
  return Status::Ok();
}

MysqlEndpoint ServerEndpoint(const ClusterConfig& config, const MysqlHostConfig& host,
                             const MysqlServerConfig& server) {
  MysqlEndpoint e = EndpointFor(config, host);
  e.label = host.name + " (" + server.Label() + ")";
  e.address = server.address;
  e.port = server.port;
  return e;
}

struct TopologyView::Impl {
  Impl(const ClusterConfig& c, MetricsRegistry* metrics) : config(c) {
    replicas.resize(config.mysql.hosts.size());
    for (const auto& h : config.mysql.hosts) {
      current.push_back(HostTopology{0, MysqlServerConfig{h.address, h.port}});
      if (!metrics) continue;
      epoch_gauges.push_back(&metrics->GetGauge(
          "cellar_mysql_topology_epoch",
          "The topology epoch of the host this process follows (grows by one per failover)",
          {{"host", h.name}}));
      for (const auto& server : h.Servers())
        lag_gauges[h.name + "/" + server.Label()] = &metrics->GetGauge(
            "cellar_mysql_replica_lag_seconds",
            "Seconds_Behind_Master of each server of a host; -1 when it is the primary, does "
            "not replicate or does not answer",
            {{"host", h.name}, {"server", server.Label()}});
      for (const auto& server : h.Servers())
        up_gauges[h.name + "/" + server.Label()] = &metrics->GetGauge(
            "cellar_mysql_server_up",
            "1 when the last topology refresh reached the server (any role), 0 when it did not "
            "answer",
            {{"host", h.name}, {"server", server.Label()}});
    }
    probes.resize(config.mysql.hosts.size());
    heartbeat_conns.resize(config.mysql.hosts.size());
    heartbeat_epochs.resize(config.mysql.hosts.size());
    placement_rows.resize(config.mysql.hosts.size());
    shard_hosts = std::make_unique<std::atomic<uint32_t>[]>(config.shards);
    const std::vector<uint32_t> initial = ResolveShardHosts(config, {});
    for (uint32_t s = 0; s < config.shards; ++s) shard_hosts[s].store(initial[s]);
  }

  const ClusterConfig config;
  std::vector<Gauge*> epoch_gauges;          // per host; empty without metrics
  std::map<std::string, Gauge*> lag_gauges;  // "<host>/<server>"
  std::map<std::string, Gauge*> up_gauges;   // "<host>/<server>"
  mutable Mutex mu;
  CondVar changed;
  std::vector<HostTopology> current GUARDED_BY(mu);
  std::vector<std::vector<ReplicaState>> replicas GUARDED_BY(mu);
  // Per host, the shard_placement rows its servers held at the last refresh
  // that reached one; resolved into shard_hosts (written under mu).
  std::vector<std::vector<ShardPlacementRow>> placement_rows GUARDED_BY(mu);
  std::unique_ptr<std::atomic<uint32_t>[]> shard_hosts;  // config.shards entries
  // Set after Start()'s first refreshes: what they find is no change to log.
  bool started GUARDED_BY(mu) = false;
  std::vector<ChangeListener> listeners;  // fixed before Start()
  // One connection per server for refreshes; used under refresh_mu only.
  Mutex refresh_mu;
  std::vector<std::map<std::string, std::unique_ptr<MysqlConnection>>> probes;

  Mutex stop_mu;
  CondVar stop_cv;
  bool stopping GUARDED_BY(stop_mu) = false;
  std::thread refresher;
  // Writes the semi-sync heartbeats (a commit that may wait for a replica's
  // ack, so not on the refresher). Its connections: one per semi_sync host.
  std::thread heartbeater;
  std::vector<std::unique_ptr<MysqlConnection>> heartbeat_conns;
  std::vector<uint64_t> heartbeat_epochs;  // epoch each heartbeat connection was verified at

  // Waits one refresh interval; false once stopping.
  bool Pause() {
    MutexLock lock(&stop_mu);
    const MicrosSinceEpoch until = NowMicros() + config.mysql.topology_refresh_ms * 1000;
    while (!stopping && NowMicros() < until)
      stop_cv.WaitFor(&stop_mu, std::chrono::microseconds(until - NowMicros()));
    return !stopping;
  }

  bool WantsHeartbeat(size_t host) const { return !config.mysql.hosts[host].replicas.empty(); }

  void Heartbeat(size_t host) {
    HostTopology t;
    {
      MutexLock lock(&mu);
      t = current[host];
    }
    if (t.epoch == 0) return;  // before `cellar init`
    const MysqlHostConfig& h = config.mysql.hosts[host];
    auto& conn = heartbeat_conns[host];
    if (conn && (conn->broken() || heartbeat_epochs[host] != t.epoch)) conn.reset();
    if (!conn) {
      auto c = MysqlConnection::Connect(ServerEndpoint(config, h, t.primary));
      if (!c.ok()) return;
      if (!VerifyPrimary(**c, config, h, t).ok()) return;
      conn = std::move(c).value();
      heartbeat_epochs[host] = t.epoch;
    }
    if (Status st = WriteSemiSyncHeartbeat(*conn, config.HostDatabase(h), t.epoch); !st.ok()) {
      conn.reset();
      LogWarn("topology", "semi-sync heartbeat failed",
              {{"host", h.name}, {"error", st.ToString()}});
    }
  }

  // One round at once: a failover right after a start finds a heartbeat.
  void HeartbeatLoop() {
    do {
      for (size_t h = 0; h < config.mysql.hosts.size(); ++h)
        if (WantsHeartbeat(h)) Heartbeat(h);
    } while (Pause());
  }

  // The highest topology any server of `host` holds (epoch 0 when none
  // answers with a row), and each server's replication lag in *lags.
  HostTopology ReadHighest(size_t host, std::map<std::string, ReplicaState>* lags,
                           std::optional<std::vector<ShardPlacementRow>>* placement) {
    MutexLock lock(&refresh_mu);
    const MysqlHostConfig& h = config.mysql.hosts[host];
    const std::string db = config.HostDatabase(h);
    HostTopology best;
    for (const MysqlServerConfig& server : h.Servers()) {
      ReplicaState& state = (*lags)[server.Label()];
      state.server = server.Label();
      auto& conn = probes[host][server.Label()];
      if (conn && conn->broken()) conn.reset();
      if (!conn) {
        auto c = MysqlConnection::Connect(ServerEndpoint(config, h, server));
        if (!c.ok()) continue;
        conn = std::move(c).value();
      }
      auto t = ReadServerTopology(*conn, db);
      if (!t.ok()) continue;
      state.reachable = true;
      if (auto rows = ReadShardPlacement(*conn, db); rows.ok()) {
        if (!*placement) placement->emplace();
        (*placement)->insert((*placement)->end(), rows->begin(), rows->end());
      }
      if (!h.replicas.empty()) {
        // Lag as staleness: how old the newest heartbeat this server holds is
        // (it moves while a replica's SQL thread is stopped, when
        // Seconds_Behind_Master says NULL).
        auto hb = ReadSemiSyncHeartbeat(*conn, db);
        auto now = conn->Query("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)");
        if (hb.ok() && hb->at > 0 && now.ok() && !now->empty())
          state.lag_seconds = std::max<double>(0, ((*now)[0].Int(0) - hb->at) / 1e6);
      }
      if (t->epoch <= best.epoch) continue;
      if (h.FindServer(t->primary.Label())) {
        best = *t;
      } else if (h.replicas.empty()) {
        // One server: whatever another config called it (a proxy, another
        // name), it is this one.
        best = HostTopology{t->epoch, server};
      }
    }
    return best;
  }

  HostTopology Refresh(size_t host) {
    std::map<std::string, ReplicaState> lags;
    std::optional<std::vector<ShardPlacementRow>> placement;
    HostTopology found = ReadHighest(host, &lags, &placement);
    HostTopology now;
    bool moved = false;
    bool learned = false;  // the first topology read: no switch to report
    {
      MutexLock lock(&mu);
      if (placement) {
        placement_rows[host] = std::move(*placement);
        UpdateShardHosts();
      }
      if (found.epoch > current[host].epoch) {
        learned = current[host].epoch == 0;
        current[host] = found;
        moved = true;
      }
      now = current[host];
      replicas[host].clear();
      for (auto& [label, state] : lags)
        if (label != now.primary.Label()) replicas[host].push_back(state);
    }
    const std::string& name = config.mysql.hosts[host].name;
    if (!epoch_gauges.empty()) epoch_gauges[host]->Set(static_cast<double>(now.epoch));
    for (const auto& [label, state] : lags)
      if (auto it = lag_gauges.find(name + "/" + label); it != lag_gauges.end())
        it->second->Set(label == now.primary.Label() ? -1 : state.lag_seconds);
    for (const auto& [label, state] : lags)
      if (auto it = up_gauges.find(name + "/" + label); it != up_gauges.end())
        it->second->Set(state.reachable ? 1 : 0);
    if (moved) {
      if (!learned)
        LogInfo("topology", "host primary changed",
                {{"host", config.mysql.hosts[host].name},
                 {"epoch", std::to_string(now.epoch)},
                 {"primary", now.primary.Label()}});
      for (const auto& l : listeners) l(host, now);
      changed.NotifyAll();
    }
    return now;
  }

  // Resolves every host's placement rows into shard_hosts, logging moves.
  void UpdateShardHosts() REQUIRES(mu) {
    std::vector<ShardPlacementRow> all;
    for (const auto& rows : placement_rows) all.insert(all.end(), rows.begin(), rows.end());
    const std::vector<uint32_t> resolved = ResolveShardHosts(config, all);
    for (uint32_t s = 0; s < config.shards; ++s) {
      const uint32_t was = shard_hosts[s].exchange(resolved[s]);
      if (was != resolved[s] && started)
        LogInfo("topology", "shard placement changed",
                {{"shard", std::to_string(s)},
                 {"from", config.mysql.hosts[was].name},
                 {"to", config.mysql.hosts[resolved[s]].name}});
    }
  }

  void RefreshLoop() {
    while (Pause())
      for (size_t h = 0; h < config.mysql.hosts.size(); ++h) Refresh(h);
  }
};

TopologyView::TopologyView(const ClusterConfig& config, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(config, metrics)) {}

TopologyView::~TopologyView() { Stop(); }

void TopologyView::Start() {
  if (impl_->refresher.joinable()) return;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h) impl_->Refresh(h);
  {
    MutexLock lock(&impl_->mu);
    impl_->started = true;
  }
  impl_->refresher = std::thread([this] { impl_->RefreshLoop(); });
  bool heartbeats = false;
  for (size_t h = 0; h < impl_->config.mysql.hosts.size(); ++h)
    heartbeats = heartbeats || impl_->WantsHeartbeat(h);
  if (heartbeats) impl_->heartbeater = std::thread([this] { impl_->HeartbeatLoop(); });
}

void TopologyView::Stop() {
  {
    MutexLock lock(&impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.NotifyAll();
  if (impl_->refresher.joinable()) impl_->refresher.join();
  if (impl_->heartbeater.joinable()) impl_->heartbeater.join();
}

HostTopology TopologyView::Current(size_t host) const {
  MutexLock lock(&impl_->mu);
  return impl_->current[host];
}

HostTopology TopologyView::Refresh(size_t host) { return impl_->Refresh(host); }

std::vector<TopologyView::ReplicaState> TopologyView::Replicas(size_t host) const {
  MutexLock lock(&impl_->mu);
  return impl_->replicas[host];
}

HostTopology TopologyView::WaitForNewer(size_t host, uint64_t epoch, MicrosSinceEpoch deadline) {
  while (true) {
    HostTopology t = Refresh(host);
    if (t.epoch > epoch || NowMicros() >= deadline) return t;
    MutexLock lock(&impl_->mu);
    const MicrosSinceEpoch wake = std::min<MicrosSinceEpoch>(deadline, NowMicros() + 100000);
    while (impl_->current[host].epoch <= epoch && NowMicros() < wake)
      impl_->changed.WaitFor(&impl_->mu, std::chrono::microseconds(wake - NowMicros()));
  }
}

void TopologyView::AddListener(ChangeListener listener) {
  impl_->listeners.push_back(std::move(listener));
}

size_t TopologyView::HostOfShard(uint32_t shard) const {
  return impl_->shard_hosts[shard].load(std::memory_order_relaxed);
}

MysqlEndpoint TopologyView::PrimaryEndpoint(size_t host) const {
  const MysqlHostConfig& h = impl_->config.mysql.hosts[host];
  return ServerEndpoint(impl_->config, h, Current(host).primary);
}

MysqlHostPool::ConnectCheck TopologyView::PrimaryCheck(size_t host) const {
  const HostTopology t = Current(host);
  const ClusterConfig* config = &impl_->config;
  return [config, host, t](MysqlConnection& conn) {
    return VerifyPrimary(conn, *config, config->mysql.hosts[host], t);
  };
}

Result<std::unique_ptr<MysqlConnection>> ConnectCurrentPrimary(const ClusterConfig& config,
                                                               size_t host) {
  TopologyView view(config);
  view.Refresh(host);
  return view.ConnectPrimary(host);
}

Result<std::unique_ptr<MysqlConnection>> TopologyView::ConnectPrimary(size_t host) {
  auto conn = MysqlConnection::Connect(PrimaryEndpoint(host));
  Status st = conn.ok() ? PrimaryCheck(host)(**conn) : conn.status();
  if (st.ok()) return conn;
  Refresh(host);
  return st.code() == StatusCode::kUnavailable ? st : Unavailable(st.message());
}

}  // namespace cellar
