// ReadRelayStatus: per stream (host, datastore) checkpoint, head, lag and the
// oldest unpublished cell's created_at.
#include <algorithm>

#include "cells/mysql_client.h"
#include "changelog/relay.h"
#include "changelog/relay_checkpoint.h"

namespace cellar {

std::vector<RelayStreamStatus> ReadRelayStatus(CellStore& store) {
  const ClusterConfig& config = store.config();
  std::vector<RelayStreamStatus> out;
  for (size_t h = 0; h < config.mysql.hosts.size(); ++h) {
    const MysqlHostConfig& host = config.mysql.hosts[h];
    const std::string db = config.HostDatabase(host);
    auto lease = store.PoolForHost(h).Acquire();
    std::string table_error;
    if (lease.ok() && !EnsureCheckpointTable(**lease, db).ok())
      table_error = "cannot create relay_checkpoint";
    for (const auto& ds : config.datastores) {
      RelayStreamStatus st;
      st.host = host.name;
      st.datastore = ds.name;
      if (!lease.ok()) {
        st.error = lease.status().ToString();
        out.push_back(st);
        continue;
      }
      auto rows =
          (*lease)->Query("SELECT IS_USED_LOCK(?) IS NOT NULL", {RelayLockName(db, ds.name)});
      if (rows.ok() && !rows->empty()) st.owned = (*rows)[0].Int(0) == 1;
      auto cp = LoadCheckpoint(**lease, db, ds.name);
      auto head = store.HostHead(ds.name, h);
      if (!cp.ok() || !head.ok()) {
        st.error = !cp.ok() ? cp.status().ToString() : head.status().ToString();
      } else {
        st.checkpoint = cp->after_added_id;
        st.checkpoint_updated_at = cp->updated_at;
        st.head = *head;
        st.lag = *head > st.checkpoint ? *head - st.checkpoint : 0;
        if (st.lag > 0) {
          auto oldest = store.HostLogCreatedAt(ds.name, h, st.checkpoint);
          if (oldest.ok())
            st.oldest_unpublished_created_at = *oldest;
          else
            st.error = oldest.status().ToString();
        }
      }
      if (!table_error.empty() && st.error.empty()) st.error = table_error;
      out.push_back(st);
    }
  }
  return out;
}

double OldestUnpublishedAgeSeconds(const RelayStreamStatus& status, MicrosSinceEpoch now) {
  if (status.lag == 0 || status.oldest_unpublished_created_at <= 0) return 0;
  return static_cast<double>(
             std::max<MicrosSinceEpoch>(0, now - status.oldest_unpublished_created_at)) /
         1e6;
}

}  // namespace cellar
