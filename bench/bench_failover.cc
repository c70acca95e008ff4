// `cellar-bench failover`: puts from blocked callers on a host whose replica
// acknowledges every commit (lossless semi-sync, AFTER_SYNC), against the
// same puts on a host without a replica (same run); then a planned and an
// emergency failover under that load (cells/host_failover.h).
//
// Private servers only: a replicating pair (server_id 1 and 2) and a lone
// server with the same settings (server_id 3, binary log on) for the baseline,
// measured in alternating halves before the broker starts; then an Apache
// Kafka broker: the exactly-once relay publishes the pair's
// cells through both failovers, and a plain read_committed reader of the
// change log counts every stored cell's events (doubled_events must be 0).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "cells/cell_store.h"
#include "cells/host_failover.h"
#include "changelog/cell_event.h"
#include "changelog/relay.h"
#include "testing/plain_topic_reader.h"
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
  int writer_threads = 0;  // group_commit.writer_threads_per_host of both hosts (0: the default)
};

using testing::PutLoad;

void Wait(double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !StopRequested())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

constexpr int kPartitions = 8;

// What a read_committed reader of the change log holds of the cells stored.
struct ChangeLogCount {
  uint64_t events = 0;    // records of the trips topic
  uint64_t distinct = 0;  // distinct cell addresses among them
  uint64_t stored = 0;    // cells in the host's table
  std::string error;
};

// Reads the trips topic until it holds an event of every stored cell (the
// relay has caught up) or `timeout_s` passes.
ChangeLogCount CountChangeLog(const ClusterConfig& cfg, testing::PrivateMariaDb& primary,
                              double timeout_s) {
  ChangeLogCount c;
  std::string out;
  if (!primary.Execute(
          "SELECT COUNT(*) FROM " + cfg.HostDatabase(cfg.mysql.hosts[0]) + ".cells_trips", &out)) {
    c.error = "cannot count the stored cells";
    return c;
  }
  c.stored = std::strtoull(out.c_str(), nullptr, 10);
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    auto topic = testing::ReadTopic(cfg.kafka.brokers, ChangeLogTopic(cfg.kafka, "trips"),
                                    kPartitions, 60000);
    if (!topic.ok()) {
      c.error = topic.status().ToString();
      return c;
    }
    std::set<std::string> seen;
    for (const testing::TopicRecord& r : topic->records) {
      auto e = DecodeCellEvent(r.value);
      if (!e.ok()) {
        c.error = "undecodable change-log event: " + e.status().ToString();
        return c;
      }
      seen.insert(CellAddress(e->datastore, e->cell.row_key, e->cell.column, e->cell.ref_key));
    }
    c.events = topic->records.size();
    c.distinct = seen.size();
    if (c.distinct >= c.stored || Clock::now() > until || StopRequested()) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// What the put phases of one mode cost: seconds measured, cells acknowledged,
// CPU seconds of this process (the callers and the store) and of the servers.
struct PhaseCost {
  double seconds = 0, cells = 0;
  double bench_cpu = 0, primary_cpu = 0, replica_cpu = 0;
  double CpuMsPerCell() const {
    return cells > 0 ? 1000 * (bench_cpu + primary_cpu + replica_cpu) / cells : 0;
  }
  // Share of the machine's cores busy with these processes.
  double Busy() const {
    const double cores = std::max(1u, std::thread::hardware_concurrency());
    return seconds > 0 ? (bench_cpu + primary_cpu + replica_cpu) / (seconds * cores) : 0;
  }
};

// Cells/s of `callers` blocked callers putting for `seconds` on a host whose
// primary is `primary` (and replica `replica`, or null); adds to *cost.
double Throughput(CellStore* store, int callers, double seconds, uint64_t* failed,
                  const testing::PrivateMariaDb& primary, const testing::PrivateMariaDb* replica,
                  PhaseCost* cost) {
  PutLoad load(store, callers);
  Wait(1);  // warm: connections, prepared statements
  auto cpu = [&] {
    return std::array<double, 3>{ProcessCpuSeconds(), ServerCpuSeconds(primary).value_or(0),
                                 replica ? ServerCpuSeconds(*replica).value_or(0) : 0};
  };
  const std::array<double, 3> cpu_before = cpu();
  const size_t before = load.acked();
  const auto start = Clock::now();
  Wait(seconds);
  const size_t cells = load.acked() - before;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const std::array<double, 3> cpu_after = cpu();
  load.Stop();
  *failed += load.failed_.size();
  cost->seconds += elapsed;
  cost->cells += cells;
  cost->bench_cpu += cpu_after[0] - cpu_before[0];
  cost->primary_cpu += cpu_after[1] - cpu_before[1];
  cost->replica_cpu += cpu_after[2] - cpu_before[2];
  return cells / elapsed;
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
  // The same group-commit settings for both hosts.
  const std::string group_commit =
      o.writer_threads > 0
          ? "group_commit:\n  writer_threads_per_host: " + std::to_string(o.writer_threads) + "\n"
          : "";
  // The pair's config with a Kafka section once the broker runs (its port is
  // known then); the put phases run before it starts, so its JVM does not
  // share the cores with them.
  auto pair_config = [&](const std::string& brokers) {
    std::string yaml = testing::MakeReplicatedClusterYaml({{a.get(), b.get()}}, o.shards, brokers,
                                                          "bench_fo", extra);
    if (!brokers.empty())
      yaml.insert(yaml.find('\n', yaml.find("brokers:")) + 1,
                  "  topic_prefix: bench_fo\n  partitions: " + std::to_string(kPartitions) + "\n");
    return ParseClusterConfig(yaml + group_commit, "<bench>");
  };
  auto plain_cfg = pair_config("");
  auto solo_cfg = ParseClusterConfig(
      testing::MakeReplicatedClusterYaml({{solo.get()}}, o.shards, "", "cellar", extra) +
          group_commit,
      "<bench>");
  if (!plain_cfg.ok() || !solo_cfg.ok()) {
    Progress("bad cluster config: " +
             (!plain_cfg.ok() ? plain_cfg.status() : solo_cfg.status()).ToString());
    return 1;
  }
  auto pair = CellStore::Open(*plain_cfg);
  auto alone = CellStore::Open(*solo_cfg);
  for (CellStore* s : {pair.get(), alone.get()})
    if (Status st = s->Init(); !st.ok()) {
      Progress("init failed: " + st.ToString());
      return 1;
    }
  const std::string host = plain_cfg->mysql.hosts[0].name;

  // Alternating halves (semi-sync, none, none, semi-sync), so that a drift of
  // the machine over the phases weighs on both alike.
  uint64_t failed = 0;
  double semisync = 0, async = 0;
  PhaseCost semisync_cost, async_cost;
  const double half = o.seconds / 2;
  for (int round = 0; round < 4; ++round) {
    const bool replicated = round == 0 || round == 3;
    Progress(std::string(replicated ? "semi-sync puts" : "puts without a replica") + ", " +
             std::to_string(o.callers) + " callers");
    (replicated ? semisync : async) +=
        (replicated
             ? Throughput(pair.get(), o.callers, half, &failed, *a, b.get(), &semisync_cost)
             : Throughput(alone.get(), o.callers, half, &failed, *solo, nullptr, &async_cost)) /
        2;
  }
  alone.reset();
  pair.reset();

  Progress("starting the Kafka broker");
  auto broker = BenchBroker::Start(BenchBrokerOptions{});
  if (!broker.ok()) {
    Progress(broker.status().ToString());
    return 1;
  }
  auto pair_cfg = pair_config((*broker)->bootstrap());
  if (!pair_cfg.ok()) {
    Progress("bad cluster config: " + pair_cfg.status().ToString());
    return 1;
  }
  pair = CellStore::Open(*pair_cfg);
  if (Status st = pair->Init(); !st.ok()) {
    Progress("init failed: " + st.ToString());
    return 1;
  }
  for (const DatastoreConfig& ds : pair_cfg->datastores)
    if (Status st = (*broker)->CreateTopic(ChangeLogTopic(pair_cfg->kafka, ds.name), kPartitions);
        !st.ok()) {
      Progress("topic: " + st.ToString());
      return 1;
    }
  Relay relay(pair.get(), "bench-failover");
  if (Status st = relay.Start(); !st.ok()) {
    Progress("relay: " + st.ToString());
    return 1;
  }

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
  Progress("reading the change log (read_committed) until it holds every stored cell");
  const ChangeLogCount log = CountChangeLog(*pair_cfg, *a, 120);
  relay.Stop();
  if (!log.error.empty()) {
    Progress("change log: " + log.error);
    return 1;
  }
  const uint64_t doubled = log.events - log.distinct;
  const uint64_t unpublished = log.stored > log.distinct ? log.stored - log.distinct : 0;

  Table t("cellar-bench failover: a host with one semi-sync replica, " + std::to_string(o.callers) +
          " blocked callers");
  t.Section("puts");
  t.Add("semi-sync (AFTER_SYNC) cells/s", FormatNumber(semisync, 0));
  t.Add("no replica (same settings) cells/s", FormatNumber(async, 0));
  t.Add("ratio (goal >= 0.7)", FormatNumber(async > 0 ? semisync / async : 0, 3));
  t.Add("CPU ms per cell, semi-sync: callers+store / primary / replica",
        FormatNumber(1000 * semisync_cost.bench_cpu / std::max(1.0, semisync_cost.cells), 3) +
            " / " +
            FormatNumber(1000 * semisync_cost.primary_cpu / std::max(1.0, semisync_cost.cells), 3) +
            " / " +
            FormatNumber(1000 * semisync_cost.replica_cpu / std::max(1.0, semisync_cost.cells), 3));
  t.Add("CPU ms per cell, no replica: callers+store / server",
        FormatNumber(1000 * async_cost.bench_cpu / std::max(1.0, async_cost.cells), 3) + " / " +
            FormatNumber(1000 * async_cost.primary_cpu / std::max(1.0, async_cost.cells), 3));
  t.Add("cores busy, semi-sync / no replica",
        FormatNumber(semisync_cost.Busy(), 2) + " / " + FormatNumber(async_cost.Busy(), 2));
  t.Add("ratio if CPU bound (no-replica / semi-sync CPU per cell)",
        FormatNumber(semisync_cost.CpuMsPerCell() > 0
                         ? async_cost.CpuMsPerCell() / semisync_cost.CpuMsPerCell()
                         : 0,
                     3));
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
  t.Section("change log (exactly-once relay, read_committed reader)");
  t.Add("cells stored", std::to_string(log.stored));
  t.Add("events", std::to_string(log.events));
  t.Add("events doubled (must be 0)", std::to_string(doubled));
  t.Add("stored cells without an event (must be 0)", std::to_string(unpublished));
  t.Print();
  nlohmann::ordered_json j;
  j["bench"] = "failover";
  j["callers"] = o.callers;
  j["semisync_cells_per_s"] = Round(semisync, 1);
  j["async_cells_per_s"] = Round(async, 1);
  j["semisync_ratio"] = Round(async > 0 ? semisync / async : 0, 3);
  j["semisync_cpu_ms_per_cell"] = Round(semisync_cost.CpuMsPerCell(), 3);
  j["async_cpu_ms_per_cell"] = Round(async_cost.CpuMsPerCell(), 3);
  j["replica_cpu_ms_per_cell"] =
      Round(1000 * semisync_cost.replica_cpu / std::max(1.0, semisync_cost.cells), 3);
  j["semisync_cores_busy"] = Round(semisync_cost.Busy(), 2);
  j["async_cores_busy"] = Round(async_cost.Busy(), 2);
  j["planned_failed_writes"] = planned_failed;
  j["planned_max_write_ms"] = Round(planned_max_ms, 1);
  j["planned_writes_stopped_ms"] = planned->writes_stopped_ms;
  j["emergency_unavailable_ms"] = Round(unavailable_ms, 1);
  j["emergency_failover_ms"] = Round(failover_ms, 1);
  j["emergency_loss_ruled_out"] = emergency->loss_ruled_out;
  j["lost_acknowledged"] = lost;
  j["acknowledged"] = load.acked_.size();
  j["failed_writes"] = load.failed_.size() + failed;
  j["doubled_events"] = doubled;
  j["unpublished_cells"] = unpublished;
  j["change_log_events"] = log.events;
  AddBrokerKeys(j, broker->get());
  PrintJsonLine(j);
  return lost == 0 && doubled == 0 && unpublished == 0 ? 0 : 1;
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
  cmd->add_option("--writer-threads", o->writer_threads,
                  "group_commit.writer_threads_per_host of both hosts (default: the config's)");
  cmd->callback([o, exit_code] { *exit_code = Run(*o); });
}

}  // namespace cellar::bench
