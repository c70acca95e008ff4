// ClusterConfig: the whole description of a Cellar cluster, loaded from YAML.
//
// Example (see config/examples/cellar.yaml for every key):
//   shards: 64
//   mysql:
//     user: root
//     password_env: CELLAR_MYSQL_PASSWORD
//     hosts:
//       - { name: db1, address: 127.0.0.1, port: 3306, shards: 0-31 }
//       - { name: db2, address: 127.0.0.1, port: 3307, shards: 32-63,
//           tls: { mode: verify_ca, ca: /etc/cellar/mysql-ca.pem } }
//   kafka: { brokers: 127.0.0.1:9092, topic_prefix: cellar, partitions: 8 }
//   datastores:
//     - name: trips
//       columns:
//         BASE: {}
//         STATUS: { ttl: 30d }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cellar {

struct ColumnConfig {
  std::string name;
  // Milliseconds a version stays visible after created_at; 0 = forever. The
  // loader fills in the datastore's ttl_ms for a column without its own `ttl`
  // (`ttl: 0s` on a column keeps it forever under a datastore default).
  int64_t ttl_ms = 0;
};

struct DatastoreConfig {
  std::string name;  // [a-z][a-z0-9_]{0,47}: part of table and topic names
  // Default TTL of the datastore's columns (YAML `ttl` beside `columns`),
  // milliseconds; 0 = forever. Already applied to columns[].ttl_ms by the loader.
  int64_t ttl_ms = 0;
  std::vector<ColumnConfig> columns;

  // nullptr when the datastore has no such column.
  const ColumnConfig* FindColumn(std::string_view column) const;
};

// TLS of the connections to a MySQL host. YAML, per host or as mysql.tls
// (the default of every host without its own block; a host's block replaces
// the default whole, it is not merged):
//   tls: { mode: verify_identity, ca: ca.pem, cert: client.pem, key: client-key.pem }
// Without any tls block connections are plain (mode disabled), as before.
// File paths are relative to the config file's directory; the loader checks
// that each named file is readable.
enum class MysqlTlsMode {
  kDisabled,        // plain TCP
  kRequired,        // TLS, the server's certificate is not checked
  kVerifyCa,        // TLS, the server's certificate must chain to `ca`
  kVerifyIdentity,  // kVerifyCa, and the certificate must name the host's address
};

struct MysqlTlsConfig {
  // Default when a tls block is given without `mode`: verify_identity.
  MysqlTlsMode mode = MysqlTlsMode::kDisabled;
  std::string ca;    // PEM CA certificate(s); required by verify_ca and verify_identity
  std::string cert;  // PEM client certificate, optional (then `key` too)
  std::string key;   // PEM private key of `cert`

  bool enabled() const { return mode != MysqlTlsMode::kDisabled; }
};

// "disabled", "required", "verify_ca", "verify_identity".
const char* MysqlTlsModeName(MysqlTlsMode mode);

// One MariaDB server of a host. Named by "address:port" (Label()) in the
// topology, the CLI and metrics.
struct MysqlServerConfig {
  std::string address = "127.0.0.1";
  int port = 3306;

  std::string Label() const;  // "address:port"
  bool operator==(const MysqlServerConfig& o) const {
    return address == o.address && port == o.port;
  }
};

// How a host's replicas acknowledge commits (YAML mysql.hosts[].replication).
enum class ReplicationMode {
  // Lossless semi-synchronous replication (rpl_semi_sync_master_enabled with
  // wait point AFTER_SYNC, GTID strict mode): a commit is answered, and seen
  // by any reader, only once a replica holds it. A primary that does not run
  // so is refused as a primary. The default; the only mode in which a
  // failover can show that no acknowledged write is lost.
  kSemiSync,
  // Asynchronous replicas: commits are answered before any replica has them;
  // an emergency failover loses what the primary had not yet sent.
  kAsync,
};
const char* ReplicationModeName(ReplicationMode mode);  // "semi_sync", "async"

struct MysqlHostConfig {
  std::string name;  // [A-Za-z0-9_-]{1,32}: logs, metrics and the database <prefix>_<name>
  // The server that is primary when the cluster is created (`cellar init`
  // bootstraps the topology with it). After a failover the topology held in
  // the host's databases names the primary (cells/host_topology.h), not this.
  std::string address = "127.0.0.1";
  int port = 3306;
  // The other servers of the host: MariaDB replicas replicating with GTIDs.
  // YAML: replicas: [ { address: 10.0.0.2, port: 3306 }, ... ]. Every server
  // (address and port) must be unique across the cluster.
  std::vector<MysqlServerConfig> replicas;
  ReplicationMode replication = ReplicationMode::kSemiSync;
  // The logical shards the host owns, ascending. YAML: ranges separated by
  // commas, e.g. "0-31" or "0-30,32" (after a shard moved).
  std::vector<uint32_t> shards;
  // The host's `tls` block, or mysql.tls when it has none.
  MysqlTlsConfig tls;

  bool Owns(uint32_t shard) const;
  // The configured primary (address, port) followed by the replicas.
  std::vector<MysqlServerConfig> Servers() const;
  // The server `label` ("address:port") of this host; nullopt when none is.
  std::optional<MysqlServerConfig> FindServer(std::string_view label) const;
  // `shards` as the YAML spells it, e.g. "0-30,32".
  std::string ShardList() const;
};

struct MysqlConfig {
  std::string user = "root";
  std::string password_env;                // name of the environment variable holding the password
  std::string database_prefix = "cellar";  // a host's tables live in database <prefix>_<host name>
  int connect_timeout_ms = 2000;           // per connection attempt
  int io_timeout_ms = 10000;               // read/write timeout of one statement round trip
  int pool_size_per_host = 8;              // idle connections kept per host however long unused
  // Idle connections beyond pool_size_per_host (left by a burst of more
  // concurrent callers) are closed once unused this long, milliseconds.
  // YAML: `pool_idle_timeout: 60s`; 0s: closed as they come back.
  int64_t pool_idle_timeout_ms = 60000;
  MysqlTlsConfig tls;  // YAML mysql.tls: the default of hosts[].tls (already applied to them)
  // How often every process re-reads each host's topology (which server is
  // primary, at which epoch) from the host's servers, milliseconds. YAML:
  // `topology_refresh: 1s`. A failover is seen within about this time.
  int64_t topology_refresh_ms = 1000;
  // How long a put, batch or erase to a host with replicas whose primary
  // cannot be reached (a failover under way) waits for one before it fails
  // Unavailable, milliseconds. YAML: `hold_writes: 10s`; 0: fail at once.
  // Writes to a host without replicas fail at once (nothing to wait for).
  int64_t hold_writes_ms = 10000;
  std::vector<MysqlHostConfig> hosts;
};

struct LimitsConfig {
  int64_t max_body_bytes = 1 << 20;  // serialized JSON body, bytes
  int max_batch_cells = 1000;        // cells in one put_batch call
  int max_log_limit = 10000;         // cells in one shard_log read
  // How long an index query given `after` (a put's position) waits for the
  // index worker to apply it before answering Unavailable. YAML:
  // `limits: { index_wait: 5s }`.
  int64_t index_wait_ms = 5000;  // milliseconds
};

struct GroupCommitConfig {
  int max_batch_cells = 256;  // cells per multi-row INSERT transaction
  // Transactions in flight per MySQL host, at most. 2 with a threshold of 16
  // beat 4 with 8 in every paired `cellar-bench put` run on 2 cores, with the
  // write fence inside the INSERT: single puts +29-41%, put_batch +12-29%.
  int writer_threads_per_host = 2;
  // A second transaction starts while one is in flight only once this many
  // cells wait (0: at once); smaller groups join the next batch.
  int min_pipelined_cells = 16;
  // A writer that just answered N > 1 puts and has nothing in flight waits up
  // to this many microseconds for N puts to queue before its next transaction
  // (callers answered by a commit usually put again at once), so fewer, larger
  // transactions, one fsync each. 0: start with whatever waits. As MySQL's
  // binlog_group_commit_sync_delay with sync_no_delay_count = N.
  int linger_us = 0;
  // While fewer than min_pipelined_cells cells wait, a host starts its next
  // transaction at most once this many microseconds have passed since its
  // previous one started (0: as soon as a writer is free). Asynchronous puts
  // (PutAsync) arriving as transactions run then share a transaction, its
  // round trips and its fsync, for at most this much more latency, and at a
  // higher rate until min_pipelined_cells wait (at 4,000 PutAsync calls/s
  // ~16 cells per transaction instead of ~7: MariaDB 0.02-0.03 ms less per
  // write, docs/cost-per-write.md, session 58). Never held: a put whose
  // caller is blocked on its answer (Put, PutBatch, Erase, every HTTP
  // request), since holding a caller that waits costs it throughput
  // (session 46: a few such callers read as a trickle, and
  // indexes_model_test's puts took 55-100 s against 28 s), nor puts when
  // none arrived while any of the host's last 4 transactions ran (their
  // callers wait for their answers). At 1,000 PutAsync calls/s, 10000
  // commits ~10 cells per transaction instead of ~2 (session 50: MariaDB
  // 0.03 ms less per write than at 5000, the PutAsync p99 4-5 ms longer).
  int commit_interval_us = 10000;
};

struct KafkaConfig {
  std::string brokers;                  // bootstrap list host:port[,host:port]; empty = no Kafka
  std::string topic_prefix = "cellar";  // topic <prefix>.<datastore>.cells
  int partitions = 8;                   // partition = shard % partitions
  int64_t max_event_body_bytes = 256 * 1024;  // larger bodies are sent as address only
  // kafka.properties: librdkafka properties (name -> value, e.g.
  // security.protocol: SASL_SSL) given to every Kafka producer and consumer
  // Cellar creates, over Cellar's own per-client defaults. Names Cellar must
  // own (IsCellarOwnedKafkaProperty) are refused by the loader; librdkafka
  // checks the rest when a client is built (changelog/kafka/kafka_properties.h).
  std::map<std::string, std::string> properties;
  // "<file>:<line>" of each entry of `properties`, for error messages; empty
  // for properties set in code.
  std::map<std::string, std::string> property_origins;
};

// True for librdkafka properties Cellar sets itself for correctness
// (bootstrap.servers, group.id, offsets and idempotence/transactions, ...):
// kafka.properties may not name them. `why` gets the reason when non-null.
bool IsCellarOwnedKafkaProperty(std::string_view name, std::string* why = nullptr);

struct RelayConfig {
  int batch_cells = 1000;  // cells read from a shard log per round
  // Pause after a caught-up read, and where the idle backoff starts. It sets
  // how many cells a relay transaction carries, and each costs the broker
  // ~4-17 ms of CPU whatever it carries: at 1,000 writes/s 20 ms cut the
  // machine's CPU per write by a quarter against 1 ms, and 40 ms another
  // 0.28-0.39 ms against 20, index p99 ~60 ms (docs/cost-per-write.md); it
  // adds up to this much to a cell's relay latency (Kafka Streams'
  // exactly-once commit.interval.ms is 100 ms).
  int poll_min_ms = 40;
  // The longest pause: an idle stream's back-off doubles up to it, and a
  // trickle's pause grows to it (target_batch_cells).
  int poll_max_ms = 50;
  // After a caught-up read the pause is long enough for about this many cells
  // to arrive at the rate the read saw, between poll_min_ms and poll_max_ms
  // (0, the default: always poll_min_ms). Below ~1,500 writes/s a
  // transaction's fixed cost (about 17 ms of machine CPU across broker,
  // clients and consumers) is most of a write's: 60 with poll_max_ms 60 cut
  // the CPU per write at 1,000 writes/s by 12% and added ~20 ms to the
  // relay's, triggers' and index's p99 at low rates (docs/cost-per-write.md,
  // session 54). Off by default: that latency has bars of its own.
  int target_batch_cells = 0;
  int lock_retry_ms = 1000;  // how often an idle relay tries to take unowned shards
  // true: each stream is published in Kafka transactions (two transactional.ids
  // per stream taking turns, RelayTransactionalIds) that also carry the
  // stream's checkpoint, so read_committed consumers see every cell exactly
  // once, also through relay kills and broker restarts (tests:
  // relay_test, kafka_processes_test on Apache Kafka). false: an idempotent
  // producer, at least once (a killed relay republishes its last batch).
  // See changelog/relay.h.
  bool exactly_once = true;
};

// Background purge (retention/purge_scheduler.h), run by the worker nodes
// (cellard): every interval_ms, each datastore's expired versions are purged as
// `cellar purge` does. YAML: `purge: { interval: 1h }`.
struct PurgeConfig {
  int64_t interval_ms = 0;  // milliseconds between runs; 0 = no background purge (default)
};

struct ClusterConfig {
  std::string source;    // file the config came from ("<string>" in tests)
  uint32_t shards = 64;  // logical shards; fixed when the cluster is created
  MysqlConfig mysql;
  LimitsConfig limits;
  GroupCommitConfig group_commit;
  KafkaConfig kafka;
  RelayConfig relay;
  PurgeConfig purge;
  std::vector<DatastoreConfig> datastores;

  const DatastoreConfig* FindDatastore(std::string_view name) const;
  // The host owning `shard`. REQUIRES: shard < shards (validated configs cover every shard).
  const MysqlHostConfig& HostForShard(uint32_t shard) const;
  // "<prefix>_<host name>", e.g. cellar_db1: the database holding every table
  // of that host (its cells log, index tables, relay checkpoints).
  std::string HostDatabase(const MysqlHostConfig& host) const;
  // HostDatabase(HostForShard(shard)). REQUIRES: shard < shards.
  std::string DatabaseForShard(uint32_t shard) const;
  // Index into mysql.hosts of the host owning `shard`. REQUIRES: shard < shards.
  size_t HostIndexForShard(uint32_t shard) const;
  // "<prefix>_s<shard>": the per-shard database of the old layout (before the
  // host log); only used to detect and migrate such a cluster.
  std::string LegacyShardDatabase(uint32_t shard) const;
  // The MySQL password from the environment variable named by mysql.password_env ("" if unset).
  std::string MysqlPassword() const;
};

// Loads and validates a cluster config. On any problem returns InvalidArgument
// whose message lists every error found, one per line, each as
//   <file>:<line>: <key path>: <what was expected>
// Unknown keys are errors. Never throws.
Result<ClusterConfig> LoadClusterConfig(const std::string& path);
// Same, from text; `source_name` is used in messages in place of a file name.
Result<ClusterConfig> ParseClusterConfig(std::string_view yaml_text,
                                         const std::string& source_name);

// True for names safe to splice into SQL identifiers and topic names.
bool IsValidDatastoreName(std::string_view name);  // [a-z][a-z0-9_]{0,47}
bool IsValidColumnName(std::string_view name);     // [A-Za-z][A-Za-z0-9_]{0,63}
bool IsValidHostName(std::string_view name);       // [A-Za-z0-9_-]{1,32}

}  // namespace cellar
