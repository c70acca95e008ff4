// Host commands: `cellar host failover HOST [--to SERVER] [--accept-loss]`
// (cells/host_failover.h).
#include <iostream>
#include <memory>

#include "cells/host_failover.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {

void AddHostCommands(CLI::App& app, const GlobalOptions& g) {
  CLI::App* host = app.add_subcommand("host", "a MySQL host's servers: failover");
  host->require_subcommand(1);
  struct FailoverArgs {
    std::string host;
    FailoverOptions options;
  };
  auto a = std::make_shared<FailoverArgs>();
  auto* failover = host->add_subcommand(
      "failover",
      "make a replica the primary of HOST: planned when the primary answers (writes held, no "
      "loss), emergency when it does not (refused unless no acknowledged write can be missing, "
      "or --accept-loss)");
  failover->add_option("HOST", a->host, "the host (a name in mysql.hosts)")->required();
  failover->add_option("--to", a->options.to,
                       "the server to promote, address:port (default: the most advanced replica)");
  failover->add_flag("--accept-loss", a->options.accept_loss,
                     "emergency: promote even when acknowledged writes may be missing, and "
                     "report which");
  failover
      ->add_option("--catch-up-timeout-ms", a->options.catch_up_timeout_ms,
                   "how long the primary's killed connections may take to end, and the "
                   "target to apply the primary's binlog")
      ->transform(DecimalInteger<int64_t>());
  failover->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    FailoverReport r = OrFail(FailoverHost(cfg, a->host, a->options, [](const std::string& line) {
      std::cerr << "cellar: " << line << "\n";
    }));
    PrintJson({{"host", r.host},
               {"kind", r.kind},
               {"from", r.from},
               {"to", r.to},
               {"epoch_before", r.epoch_before},
               {"epoch_after", r.epoch_after},
               {"position", r.position},
               {"repointed", r.repointed},
               {"fenced", r.fenced},
               {"unreachable", r.unreachable},
               {"diverged", r.diverged},
               {"loss_ruled_out", r.loss_ruled_out},
               {"may_be_lost", r.may_be_lost},
               {"writes_stopped_ms", r.writes_stopped_ms},
               {"duration_ms", r.duration_ms}});
  });
}

}  // namespace cellar::cli
