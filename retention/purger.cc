#include "retention/purger.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "base/log.h"
#include "cells/host_topology.h"
#include "cells/mysql_client.h"
#include "cells/shard_map.h"
#include "changelog/relay_checkpoint.h"
#include "indexes/index_catalog.h"
#include "indexes/index_writer.h"

namespace cellar {
namespace {

// IndexWriter::RemoveEntryOf, retried while it reports Aborted (a deadlock or
// lock wait timeout with the live index worker on the same row): nothing was
// committed, so trying again is safe.
Result<bool> RemoveWithRetry(IndexWriter& writer, const IndexedColumns& index,
                             const PurgedCell& cell) {
  for (int attempt = 0;; ++attempt) {
    auto r = writer.RemoveEntryOf(index.version.table, index.version.version, cell.row_key,
                                  cell.column, cell.ref_key);
    if (r.ok() || r.status().code() != StatusCode::kAborted || attempt >= 20) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(5 << std::min(attempt, 6)));
  }
}

// Holds PurgeLockName(database) on its own connection to the host.
class HostLock {
 public:
  // True when taken; false when another session holds it.
  Result<bool> Take(CellStore& store, size_t host_index) {
    const ClusterConfig& cfg = store.config();
    const MysqlHostConfig& host = cfg.mysql.hosts[host_index];
    CELLAR_ASSIGN_OR_RETURN(conn_, store.topology().ConnectPrimary(host_index));
    name_ = PurgeLockName(cfg.HostDatabase(host));
    CELLAR_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT GET_LOCK(?, 0)", {name_}));
    held_ = !rows.empty() && !rows[0].IsNull(0) && rows[0].Int(0) == 1;
    return held_;
  }
  ~HostLock() {
    // Closing the connection releases the lock too; this says so at once.
    if (held_) (void)conn_->Query("SELECT RELEASE_LOCK(?)", {name_});
  }
  MysqlConnection& conn() { return *conn_; }

 private:
  std::unique_ptr<MysqlConnection> conn_;
  std::string name_;
  bool held_ = false;
};

}  // namespace

std::string PurgeLockName(const std::string& host_database) {
  std::string name = "cellar_purge:" + host_database;
  if (name.size() <= 64) return name;
  const uint64_t h = Fnv1a64(name);  // distinct databases stay distinct
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "cellar_purge:" + host_database.substr(0, 34) + "~" + hex;
}

Result<PurgeReport> Purger::Run(const std::string& datastore, const std::atomic<bool>* stop) {
  const ClusterConfig& cfg = store_->config();
  if (!cfg.FindDatastore(datastore))
    return InvalidArgument("unknown datastore '" + datastore + "'");
  // Which index versions may hold entries of this datastore's cells. Without
  // the registry nothing may be deleted: the entries would be left behind.
  IndexCatalog catalog(store_);
  CELLAR_ASSIGN_OR_RETURN(const std::vector<IndexedColumns> indexes,
                          catalog.WritableOver(datastore));
  IndexWriter writer(store_, nullptr);
  const bool relay_bound = !cfg.kafka.brokers.empty();

  PurgeReport report;
  report.datastore = datastore;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = cfg.mysql.hosts[h];
    HostPurge hp;
    hp.host = host.name;
    auto run_host = [&]() -> Status {
      if (stop && stop->load()) return Aborted("stopped");
      HostLock lock;
      CELLAR_ASSIGN_OR_RETURN(bool taken, lock.Take(*store_, h));
      if (!taken) {
        hp.busy = true;
        return Status::Ok();
      }
      PurgeOptions options;
      if (relay_bound) {
        const std::string db = cfg.HostDatabase(host);
        CELLAR_RETURN_IF_ERROR(EnsureCheckpointTable(lock.conn(), db));
        CELLAR_ASSIGN_OR_RETURN(RelayCheckpoint cp, LoadCheckpoint(lock.conn(), db, datastore));
        options.max_added_id = cp.after_added_id;  // 0 when never published: nothing goes
        hp.published_up_to = cp.after_added_id;
      }
      options.before_delete = [&](const std::vector<PurgedCell>& cells) -> Status {
        if (stop && stop->load()) return Aborted("stopped");
        for (const PurgedCell& c : cells)
          for (const IndexedColumns& index : indexes) {
            if (std::find(index.columns.begin(), index.columns.end(), c.column) ==
                index.columns.end())
              continue;
            CELLAR_ASSIGN_OR_RETURN(bool removed, RemoveWithRetry(writer, index, c));
            if (removed) ++hp.index_entries_removed;
          }
        return Status::Ok();
      };
      auto stats = store_->PurgeHost(datastore, h, options);
      if (!stats.ok()) return stats.status();
      hp.deleted = stats->deleted;
      hp.held_back = stats->held_back;
      return Status::Ok();
    };
    if (Status s = run_host(); !s.ok()) {
      hp.error = s.ToString();
      ++report.hosts_failed;
      if (s.code() != StatusCode::kAborted)
        LogWarn("purge", "host failed",
                {{"datastore", datastore}, {"host", host.name}, {"error", hp.error}});
    }
    if (hp.busy) ++report.hosts_busy;
    report.deleted += hp.deleted;
    report.held_back += hp.held_back;
    report.index_entries_removed += hp.index_entries_removed;
    report.hosts.push_back(std::move(hp));
  }
  return report;
}

}  // namespace cellar
