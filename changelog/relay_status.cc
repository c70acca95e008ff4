// ReadRelayStatus: per stream (host, datastore) checkpoint, head and lag.
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
      }
      if (!table_error.empty() && st.error.empty()) st.error = table_error;
      out.push_back(st);
    }
  }
  return out;
}

}  // namespace cellar
