#include "indexes/index_retirement.h"

#include <chrono>
#include <thread>

#include "base/log.h"
#include "cells/mysql_client.h"

namespace cellar {
namespace {

// Registry names are written by Apply from validated definitions; checked
// again because they are spliced into DROP TABLE.
bool IsIndexName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

struct Candidate {
  std::string index;
  int version = 0;
  int serving = 0;
};

// The droppable versions (header): retired and older than a ready version.
Result<std::vector<Candidate>> RetiredVersions(IndexCatalog& catalog, const std::string& only) {
  std::vector<std::string> names;
  if (only.empty()) {
    CELLAR_ASSIGN_OR_RETURN(names, catalog.Indexes());
  } else {
    names.push_back(only);
  }
  std::vector<Candidate> out;
  for (const auto& name : names) {
    CELLAR_ASSIGN_OR_RETURN(auto versions, catalog.Versions(name));
    if (versions.empty() && !only.empty())
      return NotFound("index '" + name + "' has not been applied");
    int serving = 0;  // newest ready version
    for (const auto& v : versions)
      if (v.state == IndexState::kReady) serving = v.version;
    if (serving == 0) continue;  // nothing serves: keep everything
    if (!IsIndexName(name)) {
      LogWarn("index", "registry name is not an index name; its versions are kept",
              {{"index", name}});
      continue;
    }
    for (const auto& v : versions)
      if (v.state == IndexState::kRetired && v.version < serving)
        out.push_back(Candidate{name, v.version, serving});
  }
  return out;
}

// How many of `c`'s two tables host `h` holds.
Result<int64_t> TablesHeld(CellStore* store, size_t h, const Candidate& c) {
  const ClusterConfig& cfg = store->config();
  CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForHost(h).Acquire());
  CELLAR_ASSIGN_OR_RETURN(
      auto rows,
      lease->Query("SELECT COUNT(*) FROM information_schema.TABLES WHERE"
                   " TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)",
                   {cfg.HostDatabase(cfg.mysql.hosts[h]), EntryTableName(c.index, c.version),
                    PointerTableName(c.index, c.version)}));
  return rows.empty() ? 0 : rows[0].Int(0);
}

// Host names where a table of `c` exists; errors per host in `errors`. A
// pooled connection that broke since it was last used (the server restarted)
// fails once and is dropped: one more try uses a fresh one.
std::vector<std::string> HostsHolding(CellStore* store, const Candidate& c,
                                      std::vector<std::string>* errors) {
  const ClusterConfig& cfg = store->config();
  std::vector<std::string> hosts;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    auto held = TablesHeld(store, h, c);
    if (!held.ok() && held.status().code() == StatusCode::kUnavailable)
      held = TablesHeld(store, h, c);
    if (!held.ok()) {
      errors->push_back(cfg.mysql.hosts[h].name + ": " + held.status().ToString());
    } else if (*held > 0) {
      hosts.push_back(cfg.mysql.hosts[h].name);
    }
  }
  return hosts;
}

Status DropOnHost(CellStore* store, size_t h, const Candidate& c) {
  const ClusterConfig& cfg = store->config();
  const std::string db = cfg.HostDatabase(cfg.mysql.hosts[h]);
  CELLAR_ASSIGN_OR_RETURN(auto lease, store->PoolForHost(h).Acquire());
  CELLAR_RETURN_IF_ERROR(lease->ExecuteDdl(
      "DROP TABLE IF EXISTS " + QualifiedTable(db, EntryTableName(c.index, c.version)) + ", " +
      QualifiedTable(db, PointerTableName(c.index, c.version))));
  // Backfill progress rows are keyed by the entry table's name (index_maintenance.cc).
  auto exists = lease->Query(
      "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
      " AND TABLE_NAME = 'index_backfill'",
      {db});
  if (!exists.ok()) return exists.status();
  if (!exists->empty() && (*exists)[0].Int(0) > 0)
    CELLAR_RETURN_IF_ERROR(lease
                               ->Execute("DELETE FROM " + QualifiedTable(db, "index_backfill") +
                                             " WHERE table_version = ?",
                                         {EntryTableName(c.index, c.version)})
                               .status());
  return Status::Ok();
}

// Adds "host: error" to report->unreachable_hosts unless the host is there.
void NoteUnreachable(DropRetiredReport* report, const std::string& host_error) {
  const std::string host = host_error.substr(0, host_error.find(": "));
  for (const auto& u : report->unreachable_hosts)
    if (u.substr(0, u.find(": ")) == host) return;
  report->unreachable_hosts.push_back(host_error);
}

}  // namespace

Result<DropRetiredReport> DropRetiredIndexVersions(CellStore* store,
                                                   const DropRetiredOptions& options) {
  IndexCatalog catalog(store);
  DropRetiredReport report;
  report.dry_run = options.dry_run;
  CELLAR_ASSIGN_OR_RETURN(auto candidates, RetiredVersions(catalog, options.index));

  // Versions whose tables a reachable host still holds.
  std::vector<std::pair<Candidate, RetiredVersionDrop>> todo;
  for (const auto& c : candidates) {
    RetiredVersionDrop d;
    d.index = c.index;
    d.version = c.version;
    d.serving_version = c.serving;
    d.tables = {EntryTableName(c.index, c.version), PointerTableName(c.index, c.version)};
    d.hosts = HostsHolding(store, c, &d.errors);
    for (const auto& e : d.errors) NoteUnreachable(&report, e);
    // No reachable host holds it: dropped before (hosts that could not be
    // asked are in unreachable_hosts; a later run covers them).
    if (d.hosts.empty()) continue;
    todo.emplace_back(c, std::move(d));
  }
  if (options.dry_run || todo.empty()) {
    for (auto& [c, d] : todo) report.versions.push_back(std::move(d));
    return report;
  }

  // Let workers' cached writable lists and in-flight queries move past the
  // retirement, then make sure nothing changed meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(options.settle_ms));
  CELLAR_ASSIGN_OR_RETURN(auto again, RetiredVersions(catalog, options.index));
  const ClusterConfig& cfg = store->config();
  for (auto& [c, planned] : todo) {
    bool still = false;
    for (const auto& a : again)
      if (a.index == c.index && a.version == c.version) still = true;
    if (!still) continue;
    RetiredVersionDrop d;
    d.index = c.index;
    d.version = c.version;
    d.serving_version = c.serving;
    d.tables = planned.tables;
    for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
      const std::string& host = cfg.mysql.hosts[h].name;
      Status s = DropOnHost(store, h, c);
      if (s.code() == StatusCode::kUnavailable) s = DropOnHost(store, h, c);  // as HostsHolding
      bool held = false;  // its tables were there, or the host could not be asked
      for (const auto& x : planned.hosts) held |= x == host;
      for (const auto& e : planned.errors) held |= e.rfind(host + ": ", 0) == 0;
      if (s.ok()) {
        if (held) d.hosts.push_back(host);
      } else {
        d.errors.push_back(host + ": " + s.ToString());
        NoteUnreachable(&report, d.errors.back());
      }
    }
    LogInfo("index", "dropped retired version",
            {{"index", c.index},
             {"version", std::to_string(c.version)},
             {"hosts", std::to_string(d.hosts.size())},
             {"errors", std::to_string(d.errors.size())}});
    report.versions.push_back(std::move(d));
  }
  return report;
}

}  // namespace cellar
