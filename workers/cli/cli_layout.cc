// Layout commands: `cellar migrate` (per-shard layout -> host logs) and
// `cellar shards move` (one logical shard to another host).
#include <iostream>
#include <memory>

#include "cells/cell_store.h"
#include "cells/layout_migration.h"
#include "cells/shard_move.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {
namespace {

void Say(const std::string& line) { std::cerr << "cellar: " << line << "\n"; }

}  // namespace

void AddLayoutCommands(CLI::App& app, const GlobalOptions& g) {
  app.add_subcommand("migrate",
                     "copy a cluster of the per-shard layout (<prefix>_s<N> databases) into the "
                     "host logs: resumable, verified; stop the old Cellar first")
      ->callback([&g] {
        auto store = CellStore::Open(LoadConfigOrExit(g));
        auto stats = OrFail(MigrateShardLayout(*store, Say));
        OrFail(store->Init());
        PrintJson({{"tables_migrated", stats.tables_migrated},
                   {"cells_copied", stats.cells_copied},
                   {"cells_verified", stats.cells_verified}});
      });

  struct MoveArgs {
    uint32_t shard = 0;
    std::string to, from;
    bool finish = false;
  };
  auto a = std::make_shared<MoveArgs>();
  CLI::App* shards = app.get_subcommand("shards");
  auto* move = shards->add_subcommand(
      "move",
      "move one logical shard to another host in two steps: (1) --shard S --to HOST copies, "
      "catches up, freezes S and prints the config roll; (2) with the rolled config, "
      "--shard S --from HOST --finish verifies, moves index rows and deletes S from the source");
  move->add_option("--shard", a->shard, "the logical shard")
      ->transform(DecimalInteger<uint32_t>())
      ->required();
  move->add_option("--to", a->to, "step 1: the target host (a name in mysql.hosts)");
  move->add_option("--from", a->from, "step 2: the source host");
  move->add_flag("--finish", a->finish, "step 2, after the config roll");
  move->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    Result<ShardMoveReport> r =
        InvalidArgument("give --to HOST (step 1) or --from HOST --finish (step 2)");
    if (a->finish && !a->from.empty())
      r = FinishShardMove(cfg, a->shard, a->from, Say);
    else if (!a->finish && !a->to.empty())
      r = CopyAndFreezeShard(cfg, a->shard, a->to, Say);
    OrFail(r.status());
    PrintJson({{"shard", r->shard},
               {"from", {{"host", r->from_host}, {"shards", r->from_shards_after}}},
               {"to", {{"host", r->to_host}, {"shards", r->to_shards_after}}},
               {"cells_copied", r->cells_copied},
               {"catch_up_passes", r->catch_up_passes},
               {"cells_verified", r->cells_verified},
               {"digest", r->digest},
               {"index_rows_copied", r->index_rows_copied},
               {"source_rows_deleted", r->source_rows_deleted},
               {"finished", a->finish}});
  });
}

}  // namespace cellar::cli
