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
    std::string to;
  };
  auto a = std::make_shared<MoveArgs>();
  CLI::App* shards = app.get_subcommand("shards");
  auto* move = shards->add_subcommand(
      "move",
      "move one logical shard to another host while every process runs: copies and catches up, "
      "freezes the shard on its host, verifies, copies its index rows, records the new placement "
      "(learned by every process within two topology refreshes) and deletes the shard from the "
      "source, where it stays frozen");
  move->add_option("--shard", a->shard, "the logical shard")
      ->transform(DecimalInteger<uint32_t>())
      ->required();
  move->add_option("--to", a->to, "the target host (a name in mysql.hosts)")->required();
  move->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    Result<ShardMoveReport> r = MoveShard(cfg, a->shard, a->to, Say);
    OrFail(r.status());
    PrintJson({{"shard", r->shard},
               {"from", r->from_host},
               {"to", r->to_host},
               {"move_seq", r->move_seq},
               {"cells_copied", r->cells_copied},
               {"catch_up_passes", r->catch_up_passes},
               {"cells_verified", r->cells_verified},
               {"digest", r->digest},
               {"index_rows_copied", r->index_rows_copied},
               {"source_rows_deleted", r->source_rows_deleted},
               {"frozen_ms", r->frozen_ms}});
  });
}

}  // namespace cellar::cli
