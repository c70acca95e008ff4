// `cellar migrate`: copies a cluster of the per-shard layout into the host logs.
#include <iostream>

#include "cells/cell_store.h"
#include "cells/layout_migration.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {

void AddMigrateCommand(CLI::App& app, const GlobalOptions& g) {
  app.add_subcommand("migrate",
                     "copy a cluster of the per-shard layout (<prefix>_s<N> databases) into the "
                     "host logs: resumable, verified; stop the old Cellar first")
      ->callback([&g] {
        auto store = CellStore::Open(LoadConfigOrExit(g));
        auto stats = MigrateShardLayout(
            *store, [](const std::string& line) { std::cerr << "migrate: " << line << "\n"; });
        if (!stats.ok()) throw CLI::RuntimeError(Fail(stats.status()));
        if (Status s = store->Init(); !s.ok()) throw CLI::RuntimeError(Fail(s));
        PrintJson({{"tables_migrated", stats->tables_migrated},
                   {"cells_copied", stats->cells_copied},
                   {"cells_verified", stats->cells_verified}});
      });
}

}  // namespace cellar::cli
