// RelayCheckpoint: how far the relay has published one host log (host,
// datastore), stored in the host's database (table relay_checkpoint, one row
// per datastore).
//
// after_added_id is advanced only after Kafka acknowledged every cell of the
// host log up to and including it. kafka_partition/kafka_offset locate the
// record of that last cell: if the broker's partition ends at or below it on
// start-up, the broker lost events (e.g. the local in-memory broker restarted)
// and the relay republishes the host log from the beginning.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/time.h"
#include "cells/mysql_client.h"

namespace cellar {

struct RelayCheckpoint {
  uint64_t after_added_id = 0;
  int64_t kafka_offset = -1;  // -1: nothing acknowledged yet
  MicrosSinceEpoch updated_at = 0;
  int32_t kafka_partition = -1;  // partition of that record
};

// Creates the table if missing. REQUIRES: `database` is a validated host database name.
Status EnsureCheckpointTable(MysqlConnection& conn, const std::string& database);
// The checkpoint of `datastore` in `database` (zero when never saved).
Result<RelayCheckpoint> LoadCheckpoint(MysqlConnection& conn, const std::string& database,
                                       const std::string& datastore);
// Saves `cp` unless the stored checkpoint is already further (a relay that lost
// its shard can never move the new owner's checkpoint backwards).
Status SaveCheckpoint(MysqlConnection& conn, const std::string& database,
                      const std::string& datastore, const RelayCheckpoint& cp);
// Sets the checkpoint back to zero (republish everything). Keeps the owner
// epoch (internal/stream_claim.h), so the reset fences no one and frees no one.
Status ResetCheckpoint(MysqlConnection& conn, const std::string& database,
                       const std::string& datastore);

}  // namespace cellar
