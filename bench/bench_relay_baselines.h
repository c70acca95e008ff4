// The relay benchmark's baselines and probes (`cellar-bench relay`, see
// bench_relay.cc): a bare producer of the same payloads, the Kafka path alone,
// and the relay's per-round database work timed on its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "changelog/kafka/kafka_producer.h"
#include "changelog/relay_checkpoint.h"
#include "config/cluster_config.h"

namespace cellar::bench::relay_parts {

// The partitions of a baseline topic. With --config the broker may not offer
// CreateTopics (the local broker auto-creates topics with its own default
// partition count): then the baseline spreads its records over the partitions
// the topic has, and says so.
Result<int> BaselinePartitions(KafkaProducer& producer, const std::string& topic, int want);

struct Payload {
  std::string key, value;
  int32_t partition = 0;
  int64_t timestamp_ms = 0;
};

struct BaselineResult {
  double seconds = 0;
  uint64_t acknowledged = 0, failed = 0;
  std::string error;
};

BaselineResult RunProducerBaseline(const ClusterConfig& cfg, BenchBroker* broker,
                                   const std::string& topic, const std::vector<Payload>& payloads);

// Calls `done` every `step_ms` until it is true (true), the timeout passed or
// a stop was requested (false).
bool WaitUntil(const std::function<bool()>& done, double timeout_s, int step_ms = 2);

// A scratch database holding a relay_checkpoint table (created and written by
// the relay's own EnsureCheckpointTable/SaveCheckpoint), dropped on
// destruction: times what one checkpoint save costs. One thread at a time.
class ScratchCheckpoints {
 public:
  static Result<std::unique_ptr<ScratchCheckpoints>> Create(const ClusterConfig& cfg,
                                                            const std::string& run) {
    CELLAR_ASSIGN_OR_RETURN(auto conn,
                            MysqlConnection::Connect(EndpointFor(cfg, cfg.mysql.hosts.front())));
    std::unique_ptr<ScratchCheckpoints> s(new ScratchCheckpoints);
    s->conn_ = std::move(conn);
    s->db_ = cfg.mysql.database_prefix + "_bench_probe_" + run;
    CELLAR_RETURN_IF_ERROR(s->conn_->ExecuteDdl("CREATE DATABASE IF NOT EXISTS `" + s->db_ + "`"));
    CELLAR_RETURN_IF_ERROR(EnsureCheckpointTable(*s->conn_, s->db_));
    return s;
  }
  ~ScratchCheckpoints() {
    if (conn_ && !conn_->broken())
      conn_->ExecuteDdl("DROP DATABASE IF EXISTS `" + db_ + "`").IgnoreError();
  }
  // Milliseconds one `SELECT 1` round trip took; -1 on error.
  double TimeRoundTrip() {
    Stopwatch clock;
    return conn_->Query("SELECT 1").ok() ? clock.Millis() : -1;
  }
  // Milliseconds one SaveCheckpoint took (an autocommit upsert); -1 on error.
  double TimeSave() {
    Stopwatch clock;
    const uint64_t id = next_++;
    Status st = SaveCheckpoint(
        *conn_, db_, "trips",
        RelayCheckpoint{id, static_cast<int64_t>(id), NowMicros(), /*kafka_partition=*/0});
    return st.ok() ? clock.Millis() : -1;
  }

 private:
  ScratchCheckpoints() = default;
  std::unique_ptr<MysqlConnection> conn_;
  std::string db_;
  uint64_t next_ = 1;
};

// The relay's per-round work, timed alone (relay stopped): one heads query
// over every stream of the first host, one ShardLog read of a shard with one
// new cell, one checkpoint save.
struct RelayProbes {
  size_t heads_streams = 0;
  double heads_p50_ms = 0;
  double shard_log_p50_ms = 0;
  double save_p50_ms = 0;
  std::string error;
};

RelayProbes ProbeRelayWork(CellStore& store, ScratchCheckpoints& scratch,
                           const std::string& datastore, int rounds);

// Mean number of distinct shards written per `window_ms` window: the streams
// a relay round finds dirty, and the checkpoints it saves every 100 ms.
double DirtyShardsPerWindow(const std::vector<PutResult>& puts, int64_t window_ms);

// The Kafka path alone: one record at a time at `rate`/s for `seconds`, from a
// producer with the relay's settings to an ungrouped ChangeLogConsumer (same
// consumer settings as phase B) on `topic`; produce-to-consume latency in ms.
Result<std::vector<double>> ProbeKafkaPath(const ClusterConfig& cfg, BenchBroker* broker,
                                           const std::string& topic, double rate, double seconds,
                                           const std::string& payload);

}  // namespace cellar::bench::relay_parts
