// Helpers that describe a test cluster: cluster YAML over PrivateMariaDb
// servers, temp files and temp directories.
//
// Every cluster made here has these datastores:
//   trips: BASE, STATUS, EPHEMERAL (ttl 2s)
//   users: PROFILE
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/cluster_config.h"
#include "testing/private_mariadb.h"

namespace cellar::testing {

// Cluster YAML with `shards` shards split into contiguous, nearly equal
// ranges over `dbs` in order (db i owns [i*shards/n, (i+1)*shards/n - 1]),
// user root without password. `brokers` (a bootstrap list) empty = no kafka
// section, i.e. no Kafka. Host names are the dbs' labels (db1, db2, ... when
// labels repeat).
// REQUIRES: !dbs.empty(), shards >= dbs.size(); aborts with a message otherwise.
std::string MakeClusterYaml(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                            const std::string& brokers = "",
                            const std::string& database_prefix = "cellar");

// MakeClusterYaml over hosts of several servers: hosts[i][0] is host i's
// primary (address, port), the rest its `replicas`. `mysql_extra` is spliced
// into the mysql section as is (lines indented by two spaces, e.g.
// "  hold_writes: 5s\n").
std::string MakeReplicatedClusterYaml(const std::vector<std::vector<const PrivateMariaDb*>>& hosts,
                                      uint32_t shards, const std::string& brokers = "",
                                      const std::string& database_prefix = "cellar",
                                      const std::string& mysql_extra = "");

// MakeClusterYaml with a Kafka section for `brokers` whose topics are
// <prefix>.<datastore>.cells with `partitions` partitions each; `prefix` is
// also the database prefix. REQUIRES: !brokers.empty(), partitions >= 1.
std::string MakeKafkaClusterYaml(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                                 const std::string& brokers, const std::string& prefix,
                                 int partitions);

// MakeClusterYaml parsed with ParseClusterConfig (source "<test>").
// Aborts with the parse errors if the result is invalid.
ClusterConfig MakeClusterConfig(const std::vector<const PrivateMariaDb*>& dbs, uint32_t shards,
                                const std::string& brokers = "",
                                const std::string& database_prefix = "cellar");

// Writes `contents` to a new file whose name ends in `suffix` (e.g. ".yaml")
// and returns its path. Files live in one directory per process that is
// removed when the process exits normally. Aborts if the file cannot be written.
std::string WriteTempFile(const std::string& contents, const std::string& suffix);

// A fresh directory under $TMPDIR (or /tmp), removed recursively with
// everything in it when the TempDir is destroyed. Aborts if it cannot be created.
class TempDir {
 public:
  explicit TempDir(const std::string& label = "tmp");
  ~TempDir();

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name (nothing is created).
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace cellar::testing
