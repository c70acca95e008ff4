// `cellar status [--watch [SECONDS]] [--json]`: status/cluster_status.h.
#include <unistd.h>

#include <iostream>
#include <optional>

#include "base/number_text.h"
#include "base/signal_wait.h"
#include "status/cluster_status.h"
#include "triggers/trigger_config.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {
namespace {

// Bounds of `--watch SECONDS`.
constexpr double kMinWatchSeconds = 0.1;
constexpr double kMaxWatchSeconds = 86400;

struct StatusArgs {
  std::vector<std::string> watch;  // present: redraw; [0] = seconds
  bool json = false;
  std::vector<std::string> triggers;  // NAME or NAME@DATASTORE
  std::string triggers_path;
};

Result<std::vector<TriggerRef>> TriggersOf(const ClusterConfig& cfg, const StatusArgs& a) {
  std::vector<TriggerRef> out;
  if (!a.triggers_path.empty()) {
    CELLAR_ASSIGN_OR_RETURN(auto defs, LoadTriggerDefinitions(a.triggers_path, cfg));
    for (const auto& d : defs) out.push_back({d.name, d.datastore});
  }
  for (const auto& t : a.triggers) {
    const auto at = t.find('@');
    if (at != std::string::npos) {
      out.push_back({t.substr(0, at), t.substr(at + 1)});
    } else if (cfg.datastores.size() == 1) {
      out.push_back({t, cfg.datastores[0].name});
    } else {
      return InvalidArgument("say which datastore trigger '" + t + "' reads: --trigger " + t +
                             "@DATASTORE");
    }
  }
  return out;
}

}  // namespace

void AddStatusCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<StatusArgs>();
  auto* st = app.add_subcommand(
      "status",
      "one view of the cluster: hosts, relay lag per stream, trigger lag and DLQ, index lag");
  st->add_option("--watch", a->watch, "redraw every SECONDS (default 2) until Ctrl-C")
      ->expected(0, 1)
      ->type_name("[SECONDS]");
  st->add_flag("--json", a->json, "print one JSON document (with --watch: one per line)");
  st->add_option("--trigger", a->triggers,
                 "a trigger to report, NAME or NAME@DATASTORE; repeatable")
      ->type_name("NAME[@DATASTORE]");
  st->add_option("--triggers", a->triggers_path,
                 "trigger definitions (YAML): report every trigger in it")
      ->type_name("FILE");
  st->callback([a, st, &g] {
    const bool watch = st->count("--watch") > 0;
    double seconds = 2;
    // CLI11 gives `--watch` without a value as one empty string.
    if (watch && !a->watch.empty() && !a->watch[0].empty()) {
      // Decimal, finite and bounded: stod took '1abc' as 1, and a tiny
      // interval would query every host in a loop.
      std::optional<double> v = ParseDecimalDouble(a->watch[0]);
      if (!v || !(*v >= kMinWatchSeconds && *v <= kMaxWatchSeconds)) {
        std::cerr << "cellar: --watch: '" << a->watch[0] << "' is not a number of seconds from "
                  << kMinWatchSeconds << " to " << kMaxWatchSeconds << std::endl;
        throw CLI::RuntimeError(2);
      }
      seconds = *v;
    }
    if (watch) BlockTerminationSignals();  // before any library thread starts
    ClusterConfig cfg = LoadConfigOrExit(g);
    ClusterStatusOptions opts;
    opts.triggers = OrFail(TriggersOf(cfg, *a));
    auto store = CellStore::Open(cfg);
    const bool tty = isatty(1);
    for (;;) {
      ClusterStatus s = GatherClusterStatus(*store, opts);
      if (a->json) {
        // One line per document when watching, so a reader can split them.
        nlohmann::json j = ClusterStatusToJson(s);
        if (watch)
          std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    << std::endl;
        else
          PrintJson(j);
      } else {
        if (watch && tty) std::cout << "\033[H\033[2J";  // home + clear: redraw in place
        std::cout << FormatClusterStatus(s) << std::flush;
      }
      if (!watch) {
        if (!s.AnythingReachable()) throw CLI::RuntimeError(1);
        return;
      }
      if (WaitForTerminationSignal(static_cast<int>(seconds * 1000))) return;
    }
  });
}

}  // namespace cellar::cli
