// ReadRelayStatus: per (shard, datastore) checkpoint, head and lag.
#include "cells/mysql_client.h"
#include "changelog/relay.h"
#include "changelog/relay_checkpoint.h"

namespace cellar {

std::vector<RelayShardStatus> ReadRelayStatus(CellStore& store) {
  const ClusterConfig& config = store.config();
  std::vector<RelayShardStatus> out;
  for (uint32_t shard = 0; shard < config.shards; ++shard) {
    const std::string db = config.ShardDatabase(shard);
    auto lease = store.PoolForShard(shard).Acquire();
    bool owned = false;
    std::string lock_error;
    if (lease.ok()) {
      auto rows = (*lease)->Query("SELECT IS_USED_LOCK(?) IS NOT NULL", {RelayLockName(db)});
      if (rows.ok() && !rows->empty()) owned = (*rows)[0].Int(0) == 1;
      if (!EnsureCheckpointTable(**lease, db).ok()) lock_error = "cannot create relay_checkpoint";
    }
    for (const auto& ds : config.datastores) {
      RelayShardStatus st;
      st.shard = shard;
      st.datastore = ds.name;
      st.owned = owned;
      if (!lease.ok()) {
        st.error = lease.status().ToString();
        out.push_back(st);
        continue;
      }
      auto cp = LoadCheckpoint(**lease, db, ds.name);
      auto head = store.ShardHead(ds.name, shard);
      if (!cp.ok() || !head.ok()) {
        st.error = !cp.ok() ? cp.status().ToString() : head.status().ToString();
      } else {
        st.checkpoint = cp->after_added_id;
        st.checkpoint_updated_at = cp->updated_at;
        st.head = *head;
        st.lag = *head > st.checkpoint ? *head - st.checkpoint : 0;
      }
      if (!lock_error.empty() && st.error.empty()) st.error = lock_error;
      out.push_back(st);
    }
  }
  return out;
}

}  // namespace cellar
