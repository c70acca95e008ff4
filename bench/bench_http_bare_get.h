// The bare GET server of `cellar-bench http`: a cpp-httplib server in this
// process, with as many threads as the API server, that answers
//   GET /bare          with one cell's JSON: a get's HTTP exchange with no
//                      Cellar code;
//   GET /bare_sql?i=N  with the same JSON after running the store's SELECT of
//                      cell lookup(N) (kCellColumns, by address) on its own
//                      MariaDB connections: a get's exchange and its SQL with
//                      no Cellar code between them, i.e. the bound of any HTTP
//                      get in front of MariaDB with this library on this
//                      machine. The config's host for the cell's shard is
//                      asked first, then the others (a moved shard). 404
//                      when no host has the cell, 500 when a query fails.
//
// Threading: handlers run on the server's threads; Start() and the destructor
// on one thread.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "cells/cell.h"
#include "cells/mysql_client.h"
#include "config/cluster_config.h"

namespace cellar::bench {

class BareGetServer {
 public:
  // The cell that GET /bare_sql?i=N reads; must hold for every N the clients send.
  using Lookup = std::function<const CellWrite&(int)>;

  // Listening on a free loopback port, or Unavailable. `config` and `lookup`
  // outlive the server; `datastore` is the cells' datastore.
  static Result<std::unique_ptr<BareGetServer>> Start(const ClusterConfig& config,
                                                      std::string datastore, std::string answer,
                                                      Lookup lookup, int threads);
  ~BareGetServer();  // stops and joins
  BareGetServer(const BareGetServer&) = delete;
  BareGetServer& operator=(const BareGetServer&) = delete;

  int port() const { return port_; }

 private:
  BareGetServer(const ClusterConfig& config, std::string datastore, std::string answer,
                Lookup lookup);
  // The SELECT of cell lookup(i): 200, 404 (on no host) or 500.
  int SelectCell(int i);
  // The SELECT of `c` on mysql.hosts[host]: 200, 404 or 500.
  int SelectOnHost(size_t host, const CellWrite& c);

  const ClusterConfig& config_;
  const std::string datastore_;
  const std::string answer_;
  const Lookup lookup_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = -1;
  std::mutex mu_;
  std::vector<std::string> select_sql_;  // per host: the store's SELECT, built once
  std::vector<std::vector<std::unique_ptr<MysqlConnection>>> idle_;  // per host
};

}  // namespace cellar::bench
