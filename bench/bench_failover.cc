// `cellar-bench failover`: puts from blocked callers on a host whose replica
// acknowledges every commit (lossless semi-sync, AFTER_SYNC), against the
// same puts on a host without a replica (same run); then a planned and an
// emergency failover under that load (cells/host_failover.h).
//
// Private servers only: a replicating pair (server_id 1 and 2) and a lone
// server with the same settings (server_id 3, binary log on) for the baseline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_common.h"
#include "cells/cell_store.h"
#include "cells/host_failover.h"
#include "testing/private_mariadb.h"
#include "testing/put_load.h"
#include "testing/test_cluster.h"

namespace cellar::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct FailoverOptions {
  int callers = 32;
  double seconds = 10;  // per throughput phase; each failover phase runs 3x
  uint32_t shards = 16;
};

using testing::PutLoad;

void Wait(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !StopRequested())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// Cells/s of `callers` blocked callers putting for `seconds`.
double Throughput(CellStore* store, int callers, double seconds, uint64_t* failed) {
  PutLoad load(store, callers);
  Wait(1);  // warm: connections, prepared statements
  const size_t before = load.acked();
  const auto start = Clock::now();
  Wait(seconds);
  const double rate =
      (load.acked() - before) / std::chrono::duration<double>(Clock::now() - start).count();
  load.Stop();
  *failed += load.failed_.size();
  return rate;
}

int Run(const FailoverOptions& o) {
  testing::PrivateMariaDbOptions server;
  server.innodb_log_file_size = "512M";
  server.innodb_buffer_pool_size = "512M";
  server.server_id = 1;
  auto a = testing::PrivateMariaDb::Start("bench_fo_a", server);
  server.server_id = 2;
  auto b = testing::PrivateMariaDb::Start("bench_fo_b", server);
  server.server_id = 3;
  auto solo = testing::PrivateMariaDb::Start("bench_fo_solo", server);
  const std::string extra = "  topology_refresh: 200ms\n";
  auto pair_cfg = ParseClusterConfig(
      testing::MakeReplicatedClusterYaml({{a.get(), b.get()}}, o.shards, "", "cellar", extra),
      "<bench>");
  auto solo_cfg = ParseClusterConfig(
      testing::MakeReplicatedClusterYaml({{solo.get()}}, o.shards, "", "cellar", extra), "<bench>");
  if (!pair_cfg.ok() || !solo_cfg.ok()) {
    Progress("bad cluster config");
    return 1;
  }
  auto pair = CellStore::Open(*pair_cfg);
  auto alone = CellStore::Open(*solo_cfg);
  for (CellStore* s : {pair.get(), alone.get()})
    if (Status st = s->Init(); !st.ok()) {
      Progress("init failed: " + st.ToString());
      return 1;
    }
  const std::string host = pair_cfg->mysql.hosts[0].name;

  uint64_t failed = 0;
  Progress("semi-sync puts, " + std::to_string(o.callers) + " callers");
  const double semisync = Throughput(pair.get(), o.callers, o.seconds, &failed);
  Progress("puts without a replica, " + std::to_string(o.callers) + " callers");
  const double async = Throughput(alone.get(), o.callers, o.seconds, &failed);
  alone.reset();

  PutLoad load(pair.get(), o.callers);
  Wait(o.seconds);
  Progress("planned failover under load");
  const size_t failed_before_planned = load.failed();
  Result<FailoverReport> planned = FailoverHost(*pair_cfg, host, cellar::FailoverOptions{});
  Wait(o.seconds);
  const uint64_t planned_failed = load.failed() - failed_before_planned;
  const double planned_max_ms = load.max_ms();
  Progress("emergency failover: SIGKILL of the primary under load");
  b->Kill();  // the primary since the planned failover
  const auto killed = Clock::now();
  Result<FailoverReport> emergency = FailoverHost(*pair_cfg, host, cellar::FailoverOptions{});
  const double failover_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
  Wait(o.seconds);
  load.Stop();
  const double unavailable_ms = load.FirstAckAfterMs(killed);
  if (!planned.ok() || !emergency.ok()) {
    Progress("failover failed: " +
             (!planned.ok() ? planned.status().ToString() : emergency.status().ToString()));
    return 1;
  }
  uint64_t lost = 0;
  for (const CellWrite& w : load.acked_) {
    Result<Cell> c = pair->Get("trips", w.row_key, "BASE", 1);
    if (!c.ok() || c->body != w.body) ++lost;
  }

  Table t("cellar-bench failover: a host with one semi-sync replica, " + std::to_string(o.callers) +
          " blocked callers");
  t.Section("puts");
  t.Add("semi-sync (AFTER_SYNC) cells/s", FormatNumber(semisync, 0));
  t.Add("no replica (same settings) cells/s", FormatNumber(async, 0));
  t.Add("ratio (goal >= 0.7)", FormatNumber(async > 0 ? semisync / async : 0, 3));
  t.Section("planned failover under load");
  t.Add("failed writes (goal 0)", std::to_string(planned_failed));
  t.Add("longest write (ms)", FormatNumber(planned_max_ms, 1));
  t.Add("writes stopped (ms)", std::to_string(planned->writes_stopped_ms));
  t.Section("emergency failover after SIGKILL");
  t.Add("kill to first acknowledged put (ms, goal < 10000)", FormatNumber(unavailable_ms, 0));
  t.Add("failover command (ms)", FormatNumber(failover_ms, 0));
  t.Add("loss ruled out", emergency->loss_ruled_out ? "yes" : "no");
  t.Add("failed writes",
        std::to_string(load.failed_.size() - planned_failed - failed_before_planned));
  t.Add("acknowledged writes missing (must be 0)",
        std::to_string(lost) + " of " + std::to_string(load.acked_.size()));
  t.Print();
  nlohmann::ordered_json j;
  j["bench"] = "failover";
  j["callers"] = o.callers;
  j["semisync_cells_per_s"] = Round(semisync, 1);
  j["async_cells_per_s"] = Round(async, 1);
  j["semisync_ratio"] = Round(async > 0 ? semisync / async : 0, 3);
  j["planned_failed_writes"] = planned_failed;
  j["planned_max_write_ms"] = Round(planned_max_ms, 1);
  j["planned_writes_stopped_ms"] = planned->writes_stopped_ms;
  j["emergency_unavailable_ms"] = Round(unavailable_ms, 1);
  j["emergency_failover_ms"] = Round(failover_ms, 1);
  j["emergency_loss_ruled_out"] = emergency->loss_ruled_out;
  j["lost_acknowledged"] = lost;
  j["acknowledged"] = load.acked_.size();
  j["failed_writes"] = load.failed_.size() + failed;
  PrintJsonLine(j);
  return lost == 0 ? 0 : 1;
}

}  // namespace

void AddFailoverCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<FailoverOptions>();
  auto* cmd = app.add_subcommand(
      "failover",
      "puts with a semi-sync replica against none (same run), then a planned and an emergency "
      "failover under that load (private servers)");
  cmd->add_option("--callers", o->callers, "blocked callers putting one cell at a time");
  cmd->add_option("--seconds", o->seconds, "per throughput phase");
  cmd->add_option("--shards", o->shards, "logical shards");
  cmd->callback([o, exit_code] { *exit_code = Run(*o); });
}

}  // namespace cellar::bench
