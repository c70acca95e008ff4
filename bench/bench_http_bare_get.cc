#include "bench/bench_http_bare_get.h"

#include <charconv>

#include "cells/internal/cells_table.h"
#include "cells/shard_map.h"
#include "testing/wait_for.h"
#include "testing/webhook_sink.h"

namespace cellar::bench {

BareGetServer::BareGetServer(const ClusterConfig& config, std::string datastore, std::string answer,
                             Lookup lookup)
    : config_(config),
      datastore_(std::move(datastore)),
      answer_(std::move(answer)),
      lookup_(std::move(lookup)),
      idle_(config.mysql.hosts.size()) {
  // The store's statement (CellStore::GetCell), with nothing around it.
  for (const MysqlHostConfig& host : config_.mysql.hosts)
    select_sql_.push_back(
        std::string("SELECT ") + internal::kCellColumns + " FROM " +
        QualifiedTable(config_.HostDatabase(host), internal::CellsTableName(datastore_)) +
        " WHERE row_key = ? AND column_name = ? AND ref_key = ? AND created_at >= ?");
}

Result<std::unique_ptr<BareGetServer>> BareGetServer::Start(const ClusterConfig& config,
                                                            std::string datastore,
                                                            std::string answer, Lookup lookup,
                                                            int threads) {
  std::unique_ptr<BareGetServer> s(
      new BareGetServer(config, std::move(datastore), std::move(answer), std::move(lookup)));
  BareGetServer* self = s.get();
  s->server_.new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  s->server_.set_tcp_nodelay(true);
  s->server_.Get("/bare", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->answer_, "application/json");
  });
  s->server_.Get("/bare_sql", [self](const httplib::Request& req, httplib::Response& res) {
    const std::string i = req.get_param_value("i");
    int n = -1;
    std::from_chars(i.data(), i.data() + i.size(), n);
    res.status = n >= 0 ? self->SelectCell(n) : 400;
    if (res.status == 200) res.set_content(self->answer_, "application/json");
  });
  s->port_ = s->server_.bind_to_any_port("127.0.0.1");
  if (s->port_ < 0) return Unavailable("bare GET server: bind failed");
  testing::RaiseListenBacklog(s->port_);
  s->thread_ = std::thread([self] { self->server_.listen_after_bind(); });
  if (!testing::WaitFor([self] { return self->server_.is_running(); }, std::chrono::seconds(5),
                        std::chrono::milliseconds(1)))
    return Unavailable("bare GET server: not listening within 5 s");  // the destructor joins
  return s;
}

BareGetServer::~BareGetServer() {
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

int BareGetServer::SelectCell(int i) {
  const CellWrite& c = lookup_(i);
  // The config's host for the shard first; a shard moved since (--config on
  // a cluster that moved shards) is found on another.
  const size_t first = config_.HostIndexForShard(ShardForRow(c.row_key, config_.shards));
  for (size_t k = 0; k < idle_.size(); ++k) {
    const int status = SelectOnHost((first + k) % idle_.size(), c);
    if (status != 404) return status;
  }
  return 404;
}

int BareGetServer::SelectOnHost(size_t host, const CellWrite& c) {
  std::unique_ptr<MysqlConnection> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_[host].empty()) {
      conn = std::move(idle_[host].back());
      idle_[host].pop_back();
    }
  }
  if (!conn) {
    auto connected = MysqlConnection::Connect(EndpointFor(config_, config_.mysql.hosts[host]));
    if (!connected.ok()) return 500;
    conn = std::move(connected).value();
  }
  auto rows =
      conn->Query(select_sql_[host], {c.row_key.ToBytes(), c.column, c.ref_key, int64_t{0}});
  if (!rows.ok()) return 500;  // the connection is dropped
  std::lock_guard<std::mutex> lock(mu_);
  idle_[host].push_back(std::move(conn));
  return rows->empty() ? 404 : 200;
}

}  // namespace cellar::bench
