// Position tokens: where a put's cell sits in its shard's log, in a form a
// client carries back opaquely ("read your index writes": an index query given
// `after=<token>` waits until the index worker has applied that position;
// indexes/index_positions.h).
//
// A token names the datastore's log on the shard's host (a hash of the host's
// database and the datastore), the shard and the cell's added_id. Clients must
// not parse it; its spelling may change with the leading version mark.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

struct LogPosition {
  uint32_t shard = 0;
  uint64_t added_id = 0;
};

// The token of (shard, added_id) in `datastore`'s log on the host whose
// database is `host_database` (where the cell was committed; CellStore fills
// PutResult::position so).
std::string EncodeLogPosition(const std::string& host_database, const std::string& datastore,
                              uint32_t shard, uint64_t added_id);
// The same on the host the config puts `shard` on (a cluster whose shards
// never moved, and the in-memory model). REQUIRES: shard < config.shards.
std::string EncodeLogPosition(const ClusterConfig& config, const std::string& datastore,
                              uint32_t shard, uint64_t added_id);

// The database of the host that holds `shard` now (CellStore::DatabaseOfShard).
using ShardDatabaseFn = std::function<std::string(uint32_t shard)>;

// The position `token` names. InvalidArgument naming the token when it is not
// a position token, or when it names another datastore's log, another
// cluster's, or a host that no longer owns its shard (the shard moved since
// the put: its log positions there mean nothing). `database_of_shard` says
// where each shard is now; empty: where the config puts it.
Result<LogPosition> DecodeLogPosition(const ClusterConfig& config, const std::string& datastore,
                                      const std::string& token,
                                      const ShardDatabaseFn& database_of_shard = {});

}  // namespace cellar
