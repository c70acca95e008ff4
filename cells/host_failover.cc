#include "cells/host_failover.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>

#include "base/log.h"
#include "cells/host_servers.h"
#include "cells/host_topology.h"
#include "cells/mysql_client.h"
#include "cells/schema_changes.h"

namespace cellar {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MillisSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// "2026-12-02T03:04:05Z" of a server clock value.
std::string Utc(MicrosSinceEpoch t) {
  const std::time_t s = static_cast<std::time_t>(t / 1000000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<std::unique_ptr<MysqlConnection>> ConnectTo(const ClusterConfig& config,
                                                   const MysqlHostConfig& host,
                                                   const MysqlServerConfig& server) {
  return MysqlConnection::Connect(ServerEndpoint(config, host, server));
}

// One failover of a host at a time: GET_LOCK on the first server that answers,
// held by the returned connection until it closes.
Result<std::unique_ptr<MysqlConnection>> TakeLock(const ClusterConfig& config,
                                                  const MysqlHostConfig& host) {
  Status last = Unavailable("no server of host " + host.name + " answers");
  for (const MysqlServerConfig& server : host.Servers()) {
    auto conn = ConnectTo(config, host, server);
    if (!conn.ok()) {
      last = conn.status();
      continue;
    }
    CELLAR_ASSIGN_OR_RETURN(auto rows, (*conn)->Query("SELECT GET_LOCK(?, 0)",
                                                      {SqlParam("cellar_failover_" + host.name)}));
    if (rows.empty() || rows[0].Int(0) != 1)
      return FailedPrecondition("another failover of host " + host.name +
                                " is running (it holds the lock on " + server.Label() +
                                "); wait for it and look at `cellar status`");
    return std::move(conn).value();
  }
  return last;
}

const ServerState* StateOf(const std::vector<ServerState>& states, const std::string& label) {
  for (const auto& s : states)
    if (s.server.Label() == label) return &s;
  return nullptr;
}

Status ArgumentErrors(const ClusterConfig& config, const std::string& name,
                      const FailoverOptions& options, size_t* index) {
  std::string names;
  for (size_t i = 0; i < config.mysql.hosts.size(); ++i) {
    const MysqlHostConfig& h = config.mysql.hosts[i];
    names += (names.empty() ? "" : ", ") + h.name;
    if (h.name == name) *index = i;
  }
  if (*index == config.mysql.hosts.size())
    return InvalidArgument("no host '" + name + "' in the config (hosts: " + names + ")");
  if (options.catch_up_timeout_ms <= 0)
    return InvalidArgument("catch_up_timeout_ms must be positive (got " +
                           std::to_string(options.catch_up_timeout_ms) + ")");
  const MysqlHostConfig& host = config.mysql.hosts[*index];
  if (host.replicas.empty())
    return InvalidArgument("host " + host.name + " has no replicas (mysql.hosts[" +
                           std::to_string(*index) + "].replicas): there is no server to fail " +
                           "over to");
  if (!options.to.empty() && !host.FindServer(options.to)) {
    std::string servers;
    for (const auto& s : host.Servers()) servers += (servers.empty() ? "" : ", ") + s.Label();
    for (const auto& other : config.mysql.hosts)
      if (other.FindServer(options.to))
        return InvalidArgument("server " + options.to + " belongs to host " + other.name +
                               ", not to host " + host.name + " (its servers: " + servers + ")");
    return InvalidArgument("server '" + options.to + "' is not a server of host " + host.name +
                           " (its servers: " + servers + "; give one as address:port)");
  }
  return Status::Ok();
}

// Steps 3 of both kinds: `target` becomes the primary at `topology`.
Status Promote(const ClusterConfig& config, const MysqlHostConfig& host, MysqlConnection& target,
               const HostTopology& topology, const std::vector<ServerState>& states,
               const std::string& former_primary, FailoverReport* report,
               const FailoverProgress& progress) {
  const std::string label = topology.primary.Label();
  auto step = [&](const std::string& what, const Status& st) {
    return st.ok() ? st
                   : Status(st.code(), "promoting " + label + ": " + what + ": " + st.message());
  };
  if (progress) progress("promoting " + label + " at epoch " + std::to_string(topology.epoch));
  CELLAR_RETURN_IF_ERROR(step("stop replication", StopReplicating(target)));
  CELLAR_RETURN_IF_ERROR(
      step("write the topology", WriteServerTopology(target, config.HostDatabase(host), topology)));
  for (const ServerState& s : states) {
    if (s.server == topology.primary || !s.reachable()) continue;
    auto conn = ConnectTo(config, host, s.server);
    Status st = conn.ok() ? (*conn)->ExecuteDdl("SET GLOBAL read_only = ON") : conn.status();
    if (st.ok())
      st = ReplicateFrom(**conn, config, topology.primary,
                         s.server.Label() == former_primary || s.master.empty());
    if (!st.ok()) {
      report->unreachable.push_back(s.server.Label());
      LogWarn("failover", "server not pointed at the new primary",
              {{"host", host.name}, {"server", s.server.Label()}, {"error", st.ToString()}});
      continue;
    }
    report->repointed.push_back(s.server.Label());
    if (!s.read_only) report->fenced.push_back(s.server.Label());
  }
  CELLAR_RETURN_IF_ERROR(step("open it for writes", OpenAsPrimary(target, host)));
  CELLAR_RETURN_IF_ERROR(step("verify it", VerifyPrimary(target, config, host, topology)));
  CELLAR_ASSIGN_OR_RETURN(auto pos, target.Query("SELECT @@gtid_binlog_pos"));
  report->position = pos.empty() ? "" : pos[0].Bytes(0);
  return Status::Ok();
}

// The reachable replica that received the most, or `to` (refused when
// another received more).
Result<const ServerState*> ChooseTarget(const MysqlHostConfig& host,
                                        const std::vector<ServerState>& states,
                                        const std::string& primary, const std::string& to,
                                        bool must_replicate_from_primary) {
  std::vector<std::pair<const ServerState*, GtidPosition>> candidates;
  for (const ServerState& s : states) {
    if (!s.reachable() || s.server.Label() == primary) continue;
    if (must_replicate_from_primary && s.master != primary) continue;
    // What it holds or will hold: received (io) or applied, whichever covers.
    auto applied = GtidPosition::Parse(s.gtid_current_pos);
    auto received = GtidPosition::Parse(s.gtid_io_pos);
    if (!applied.ok() || !received.ok()) continue;
    candidates.emplace_back(&s, received->Covers(*applied) ? *received : *applied);
  }
  if (!to.empty()) {
    const ServerState* t = StateOf(states, to);
    if (!t || !t->reachable())
      return Unavailable("server " + to + " does not answer: " + (t ? t->error : ""));
    if (must_replicate_from_primary && t->master != primary)
      return FailedPrecondition("server " + to + " does not replicate from the primary " + primary +
                                " (its primary: " + (t->master.empty() ? "none" : t->master) +
                                "); point it at " + primary + " first");
    const GtidPosition* mine = nullptr;
    for (const auto& [s, p] : candidates)
      if (s == t) mine = &p;
    for (const auto& [s, p] : candidates)
      if (mine && !mine->Covers(p))
        return FailedPrecondition("replica " + s->server.Label() + " received more than " + to +
                                  " (" + p.text() + " against " + mine->text() +
                                  "); fail over to it, or omit --to");
    return t;
  }
  for (const auto& [s, p] : candidates) {
    bool covers_all = true;
    for (const auto& [o, q] : candidates) covers_all = covers_all && p.Covers(q);
    if (covers_all) return s;
  }
  std::string seen;
  for (const ServerState& s : states)
    seen += "; " + s.server.Label() + ": " +
            (s.reachable() ? "primary " + (s.master.empty() ? std::string("none") : s.master) +
                                 ", position " + s.gtid_current_pos
                           : s.error);
  return FailedPrecondition("no replica of host " + host.name + " can be promoted" + seen);
}

// A run naming the current primary: every other server that answers is made
// read_only, and one that does not replicate from the primary (a former
// primary back after an emergency failover) is pointed at it, unless it holds
// commits the primary lacks (`diverged`: rebuild it from the primary).
void RejoinOthers(const ClusterConfig& config, const MysqlHostConfig& host,
                  const MysqlServerConfig& primary, const ServerState* p,
                  const std::vector<ServerState>& states, FailoverReport* report,
                  const FailoverProgress& progress) {
  const std::string label = primary.Label();
  auto primary_history = p && p->reachable() ? GtidPosition::Parse(p->gtid_binlog_state)
                                             : Result<GtidPosition>(Unavailable(label));
  for (const ServerState& s : states) {
    if (!s.reachable() || s.server == primary) continue;
    auto conn = ConnectTo(config, host, s.server);
    if (!conn.ok()) {
      report->unreachable.push_back(s.server.Label());
      continue;
    }
    if (!s.read_only && (*conn)->ExecuteDdl("SET GLOBAL read_only = ON").ok())
      report->fenced.push_back(s.server.Label());
    if (s.master == label || !primary_history.ok()) continue;
    auto holds = GtidPosition::Parse(s.gtid_current_pos);
    if (!holds.ok() || !primary_history->HistoryHolds(*holds)) {
      report->diverged.push_back(s.server.Label());
      LogWarn("failover", "server holds commits the primary lacks: not pointed at it",
              {{"host", host.name},
               {"server", s.server.Label()},
               {"server_position", s.gtid_current_pos},
               {"primary_history", p->gtid_binlog_state}});
      continue;
    }
    if (progress) progress("pointing " + s.server.Label() + " at the primary " + label);
    Status st = ReplicateFrom(**conn, config, primary, s.master.empty());
    if (st.ok()) {
      report->repointed.push_back(s.server.Label());
    } else {
      report->unreachable.push_back(s.server.Label());
      LogWarn("failover", "server not pointed at the primary",
              {{"host", host.name}, {"server", s.server.Label()}, {"error", st.ToString()}});
    }
  }
}

}  // namespace

Result<FailoverReport> FailoverHost(const ClusterConfig& config, const std::string& name,
                                    const FailoverOptions& options,
                                    const FailoverProgress& progress) {
  const Clock::time_point start = Clock::now();
  size_t index = config.mysql.hosts.size();
  CELLAR_RETURN_IF_ERROR(ArgumentErrors(config, name, options, &index));
  const MysqlHostConfig& host = config.mysql.hosts[index];
  CELLAR_ASSIGN_OR_RETURN(auto lock, TakeLock(config, host));
  const std::vector<ServerState> states = InspectHost(config, host);

  FailoverReport report;
  report.host = host.name;
  HostTopology current{0, MysqlServerConfig{host.address, host.port}};
  for (const ServerState& s : states) {
    if (!s.reachable()) report.unreachable.push_back(s.server.Label());
    if (s.reachable() && s.topology.epoch > current.epoch &&
        host.FindServer(s.topology.primary.Label()))
      current = s.topology;
  }
  // A server replicating from another server than the primary its topology
  // row names has not received the topology write of the failover that
  // pointed it there: the host is past that epoch, its primary that master
  // (it does not answer, or its own row would be the highest).
  for (const ServerState& s : states) {
    if (!s.reachable() || s.master.empty() || s.topology.epoch == 0 ||
        s.topology.epoch < current.epoch || s.master == s.topology.primary.Label())
      continue;
    if (std::optional<MysqlServerConfig> m = host.FindServer(s.master)) {
      current = HostTopology{s.topology.epoch + 1, *m};
      LogWarn("failover", "a server replicates from a primary whose topology it has not received",
              {{"host", host.name},
               {"server", s.server.Label()},
               {"its_row", std::to_string(s.topology.epoch) + " " + s.topology.primary.Label()},
               {"primary", s.master}});
    }
  }
  const std::string primary = current.primary.Label();
  report.from = primary;
  report.epoch_before = current.epoch;
  const ServerState* p = StateOf(states, primary);

  if (options.to == primary) {  // already the primary: fence and rejoin the others
    report.kind = "none";
    report.to = primary;
    report.epoch_after = current.epoch;
    RejoinOthers(config, host, current.primary, p, states, &report, progress);
    report.duration_ms = MillisSince(start);
    return report;
  }

  const bool planned = p != nullptr && p->reachable();
  report.kind = planned ? "planned" : "emergency";
  CELLAR_ASSIGN_OR_RETURN(const ServerState* target,
                          ChooseTarget(host, states, primary, options.to, planned));
  report.to = target->server.Label();
  HostTopology next{current.epoch + 1, target->server};
  report.epoch_after = next.epoch;
  CELLAR_ASSIGN_OR_RETURN(auto t, ConnectTo(config, host, target->server));

  if (planned) {
    CELLAR_ASSIGN_OR_RETURN(auto pc, ConnectTo(config, host, current.primary));
    if (progress) progress("fencing the primary " + primary);
    const Clock::time_point stopped = Clock::now();
    auto reopen = [&](const Status& why) {
      Status undo = OpenAsPrimary(*pc, host);
      return Status(why.code(), why.message() + (undo.ok() ? "; the primary " + primary +
                                                                 " was reopened: nothing changed"
                                                           : "; reopening the primary " + primary +
                                                                 " failed too: " + undo.message()));
    };
    if (Status st = FenceServer(*pc, config, host, options.catch_up_timeout_ms); !st.ok())
      return reopen(st);
    report.fenced.push_back(primary);
    auto pos = pc->Query("SELECT @@gtid_binlog_pos");
    if (!pos.ok()) return reopen(pos.status());
    const std::string position = pos->empty() ? "" : (*pos)[0].Bytes(0);
    if (progress) progress("waiting for " + report.to + " to apply " + position);
    if (Status st = WaitForPosition(*t, position, options.catch_up_timeout_ms); !st.ok())
      return reopen(st);
    CELLAR_RETURN_IF_ERROR(Promote(config, host, *t, next, states, primary, &report, progress));
    report.writes_stopped_ms = MillisSince(stopped);
  } else {
    if (progress) progress("the primary " + primary + " does not answer: emergency failover");
    // What it received is applied by its SQL thread, which an operator may
    // have stopped. In GTID mode MariaDB discards the relay log when a slave
    // thread starts while both are stopped: the SQL thread starts while the
    // IO thread still runs (or tries to connect), then the IO thread stops.
    // With both stopped already, what it received cannot be applied: the
    // loss check below decides on what it applied.
    std::string received = target->gtid_io_pos;
    if (!target->sql_running) {
      if (target->io_running || target->io_connecting) {
        CELLAR_RETURN_IF_ERROR(t->ExecuteDdl("START SLAVE SQL_THREAD"));
      } else {
        received.clear();
        LogWarn("failover",
                "both replication threads of the target are stopped: MariaDB discards "
                "what it received and did not apply when one starts",
                {{"host", host.name}, {"server", report.to}});
      }
    }
    CELLAR_RETURN_IF_ERROR(t->ExecuteDdl("STOP SLAVE IO_THREAD"));
    auto restart = [&](const Status& why) {
      Status undo = t->ExecuteDdl("START SLAVE");
      return Status(why.code(), why.message() + (undo.ok() ? "; nothing changed" : ""));
    };
    if (!received.empty()) {
      if (progress) progress("letting " + report.to + " apply what it received: " + received);
      if (Status st = WaitForPosition(*t, received, options.catch_up_timeout_ms); !st.ok())
        return restart(st);
    }
    auto now = InspectServer(*t, config, host, target->server);
    if (!now.ok()) return restart(now.status());
    // What it applied may name a later epoch than any row read before: the
    // new epoch must exceed it, and only that epoch's primary's heartbeat
    // speaks for the commits it acknowledged.
    const uint64_t latest = std::max(current.epoch, now->topology.epoch);
    next.epoch = latest + 1;
    report.epoch_after = next.epoch;
    const SemiSyncHeartbeat& hb = now->heartbeat;
    std::string why_not;
    for (const ServerState& s : states)
      if (!s.reachable() && s.server.Label() != primary)
        why_not = "replica " + s.server.Label() + " does not answer (it may hold commits " +
                  report.to + " lacks)";
    if (host.replication != ReplicationMode::kSemiSync)
      why_not = "host " + host.name + " replicates asynchronously";
    else if (why_not.empty() && hb.at == 0)
      why_not = report.to + " holds no semi-sync heartbeat of the primary";
    else if (why_not.empty() && hb.epoch < latest)
      why_not = "the newest semi-sync heartbeat " + report.to + " holds was written by the " +
                "primary of epoch " + std::to_string(hb.epoch) + ", not by " + primary +
                " (epoch " + std::to_string(latest) + "), which may have acknowledged commits " +
                "before any replica received them";
    else if (why_not.empty() && !hb.semi_sync_on)
      why_not = "the primary had fallen back to asynchronous replication at " + Utc(hb.at) +
                " (its last semi-sync heartbeat)";
    else if (why_not.empty() && now->now >= hb.at + (hb.timeout_ms - 1000) * 1000)
      why_not = "the last semi-sync heartbeat " + report.to + " holds was written at " +
                Utc(hb.at) + ", more than the primary's semi-sync timeout (" +
                std::to_string(hb.timeout_ms) + " ms, less 1 s) ago: the primary may have " +
                "fallen back to asynchronous commits since";
    if (!why_not.empty()) {
      report.loss_ruled_out = false;
      report.may_be_lost =
          hb.at == 0 || hb.epoch < latest
              ? "any commit the primary acknowledged that " + report.to + " did not receive"
              : "commits the primary acknowledged after " +
                    Utc(hb.semi_sync_on ? hb.at + hb.timeout_ms * 1000 : hb.at) + " that " +
                    report.to + " did not receive";
      if (!options.accept_loss)
        return restart(FailedPrecondition(
            "cannot show that no acknowledged write of host " + host.name + " is missing from " +
            report.to + ": " + why_not + ". Bring the primary " + primary +
            " back, or rerun with --accept-loss to promote " + report.to + " anyway (" +
            report.may_be_lost + " would be lost)"));
    }
    CELLAR_RETURN_IF_ERROR(Promote(config, host, *t, next, states, primary, &report, progress));
  }
  report.duration_ms = MillisSince(start);
  LogInfo("failover", "host failed over",
          {{"host", host.name},
           {"kind", report.kind},
           {"from", report.from},
           {"to", report.to},
           {"epoch", std::to_string(report.epoch_after)},
           {"loss_ruled_out", report.loss_ruled_out ? "true" : "false"}});
  (void)lock;
  return report;
}

Status BootstrapHost(const ClusterConfig& config, size_t index) {
  const MysqlHostConfig& host = config.mysql.hosts[index];
  const std::vector<ServerState> states = InspectHost(config, host);
  for (const ServerState& s : states)
    if (s.reachable() && s.topology.epoch > 0) return Status::Ok();
  const ServerState& p = states.front();  // the configured primary
  if (!p.reachable())
    return Unavailable("host " + host.name + ": its primary " + p.server.Label() +
                       " does not answer: " + p.error);
  CELLAR_ASSIGN_OR_RETURN(auto pc, ConnectTo(config, host, p.server));
  CELLAR_RETURN_IF_ERROR(CreateDatabaseIfMissing(*pc, config.HostDatabase(host)));
  for (size_t i = 1; i < states.size(); ++i) {
    const ServerState& r = states[i];
    if (!r.reachable() || !r.master.empty()) continue;
    auto rc = ConnectTo(config, host, r.server);
    Status st = rc.ok() ? (*rc)->ExecuteDdl("SET GLOBAL read_only = ON") : rc.status();
    if (st.ok()) st = ReplicateFrom(**rc, config, p.server, /*former_primary=*/false);
    if (!st.ok())
      return Status(st.code(), "host " + host.name + ": pointing replica " + r.server.Label() +
                                   " at " + p.server.Label() + ": " + st.message());
  }
  const bool semi_sync = host.replication == ReplicationMode::kSemiSync && !host.replicas.empty();
  if (p.read_only ||
      (semi_sync && (!p.semi_sync_master_enabled || p.semi_sync_wait_point != "AFTER_SYNC")))
    CELLAR_RETURN_IF_ERROR(OpenAsPrimary(*pc, host));
  return WriteServerTopology(*pc, config.HostDatabase(host), HostTopology{1, p.server});
}

}  // namespace cellar
