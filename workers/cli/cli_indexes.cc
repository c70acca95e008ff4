// `cellar index apply | query | backfill | check | status | drop-retired`.
#include <unistd.h>

#include <cstdio>

#include "api/index_request.h"
#include "base/signal_wait.h"
#include "changelog/cell_event.h"
#include "changelog/consumer_groups.h"
#include "changelog/kafka/consumer_group_lag.h"
#include "indexes/index_catalog.h"
#include "indexes/index_maintenance.h"
#include "indexes/index_query.h"
#include "indexes/index_retirement.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {
namespace {

struct IndexArgs {
  std::string indexes_path = "indexes";
  std::string name, shard_value, order_by, cursor, after;
  std::vector<std::string> where, fields;
  int limit = 100;
  bool ascending = false, verify = false, repair = false, dry_run = false;
  ReadPreference read = ReadPreference::kPrimary;  // query --read
};

std::vector<IndexDefinition> LoadDefsOrExit(const ClusterConfig& cfg, const IndexArgs& a) {
  auto defs = LoadIndexDefinitions(a.indexes_path, cfg);
  if (!defs.ok() && defs.status().code() == StatusCode::kNotFound)
    OrFail(NotFound(defs.status().message() +
                    "; give the definitions' file or directory with `cellar index --indexes "
                    "PATH <command>` (default: ./indexes)"));
  return OrFail(std::move(defs));
}

const IndexDefinition& FindOrExit(const std::vector<IndexDefinition>& defs,
                                  const std::string& name) {
  for (const auto& d : defs)
    if (d.table == name) return d;
  throw CLI::RuntimeError(Fail(NotFound("no index '" + name + "' in the definitions")));
}

}  // namespace

void AddIndexCommands(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<IndexArgs>();
  auto* idx = app.add_subcommand("index", "secondary index commands");
  idx->require_subcommand(1);
  idx->add_option("--indexes", a->indexes_path, "index definition file or directory")
      ->capture_default_str();

  idx->add_subcommand("apply",
                      "create missing index tables and new versions of changed definitions")
      ->callback([a, &g] {
        ClusterConfig cfg = LoadConfigOrExit(g);
        auto store = CellStore::Open(cfg);
        IndexCatalog catalog(store.get());
        nlohmann::json out = nlohmann::json::array();
        for (const auto& d : LoadDefsOrExit(cfg, *a)) {
          auto r = OrFail(catalog.Apply(d));
          out.push_back({{"index", d.table},
                         {"version", r.version.version},
                         {"state", IndexStateName(r.version.state)},
                         {"created", r.created}});
        }
        PrintJson(out);
      });

  auto* query = idx->add_subcommand("query", "query an index (touches one shard)");
  query->add_option("name", a->name, "index name")->required();
  query->add_option("--shard-value", a->shard_value, "value of the shard field")->required();
  query->add_option("--where", a->where, "'field op value' (= != < <= > >= in); repeatable");
  query->add_option("--field", a->fields, "fields to return (default all); repeatable");
  query->add_option("--order-by", a->order_by, "order by this field (default newest first)");
  query->add_flag("--asc", a->ascending, "ascending order");
  query->add_option("--limit", a->limit, "page size (1-1000)")->transform(DecimalInteger<int>());
  query->add_option("--cursor", a->cursor, "next_cursor of the previous page");
  query->add_flag("--verify", a->verify, "re-read each hit's latest cell and drop stale hits");
  query->add_option("--after", a->after,
                    "a put's \"position\": wait until the index has applied that put");
  AddReadOption(query, &a->read,
                "primary (default) or replica: a replica's entries may be stale by its lag "
                "unless --after is given");
  query->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto defs = LoadDefsOrExit(cfg, *a);
    const IndexDefinition& def = FindOrExit(defs, a->name);
    IndexQuery q;
    q.index = a->name;
    q.shard_value = a->shard_value;
    for (const auto& w : a->where) q.filters.push_back(OrFail(ParseIndexFilter(def, w)));
    q.fields = a->fields;
    q.order_by = a->order_by;
    q.descending = !a->ascending;
    q.limit = a->limit;
    q.cursor = a->cursor;
    q.verify = a->verify;
    q.after = a->after;
    q.read = a->read;
    auto store = CellStore::Open(cfg);
    IndexReader reader(store.get(), defs);
    nlohmann::json out = IndexQueryResultToJson(a->name, OrFail(reader.Query(q)), a->verify);
    out.erase("index");  // the HTTP answer's; the command line never printed it
    PrintJson(out);
  });

  auto* backfill = idx->add_subcommand("backfill", "build entries for existing cells (resumable)");
  backfill->add_option("name", a->name, "index name")->required();
  backfill->callback([a, &g] {
    BlockTerminationSignals();
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto defs = LoadDefsOrExit(cfg, *a);
    auto store = CellStore::Open(cfg);
    const bool tty = isatty(2);
    std::atomic<bool> stop{false};
    Status s = BackfillIndex(
        store.get(), FindOrExit(defs, a->name),
        [&](const BackfillProgress& p) {
          if (WaitForTerminationSignal(0)) stop = true;
          if (!tty) return;
          const double pct = p.cells_total ? 100.0 * p.cells_done / p.cells_total : 100;
          const int bar = static_cast<int>(pct / 5);
          std::fprintf(stderr, "\r[%-20s] %5.1f%% %llu/%llu cells  %.0f cells/s  ETA %.0fs ",
                       std::string(bar, '#').c_str(), pct,
                       static_cast<unsigned long long>(p.cells_done),
                       static_cast<unsigned long long>(p.cells_total), p.cells_per_s, p.eta_s);
        },
        &stop);
    if (tty) std::fprintf(stderr, "\n");
    OrFail(s);
    PrintJson({{"index", a->name}, {"backfilled", true}});
  });

  auto* check = idx->add_subcommand("check", "compare the index with the cells (and --repair)");
  check->add_option("name", a->name, "index name")->required();
  check->add_flag("--repair", a->repair, "fix missing, stale and extra entries");
  check->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto defs = LoadDefsOrExit(cfg, *a);
    auto store = CellStore::Open(cfg);
    auto r = OrFail(CheckIndex(store.get(), FindOrExit(defs, a->name), a->repair));
    PrintJson({{"index", a->name},
               {"version", r.version},
               {"expected", r.expected},
               {"present", r.present},
               {"missing", r.missing},
               {"stale", r.stale},
               {"extra", r.extra},
               {"repaired", r.repaired},
               {"examples", r.examples}});
    if (!a->repair && (r.missing || r.stale || r.extra)) throw CLI::RuntimeError(1);
  });

  auto* drop = idx->add_subcommand(
      "drop-retired",
      "drop the tables of retired index versions on every host (index_retirement.h)");
  drop->add_option("name", a->name, "only this index (default: every index in the registry)");
  drop->add_flag("--dry-run", a->dry_run, "print what would be dropped; drop nothing");
  drop->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto store = CellStore::Open(cfg);
    DropRetiredOptions opts;
    opts.index = a->name;
    opts.dry_run = a->dry_run;
    auto r = OrFail(DropRetiredIndexVersions(store.get(), opts));
    nlohmann::json versions = nlohmann::json::array();
    for (const auto& v : r.versions)
      versions.push_back({{"index", v.index},
                          {"version", v.version},
                          {"serving_version", v.serving_version},
                          {"tables", v.tables},
                          {"hosts", v.hosts},
                          {"errors", v.errors}});
    nlohmann::json out = {{"dry_run", r.dry_run},
                          {r.dry_run ? "would_drop" : "dropped", versions},
                          {"unreachable_hosts", r.unreachable_hosts}};
    if (r.versions.empty())
      out["message"] = r.unreachable_hosts.empty()
                           ? "no retired index version has tables left to drop"
                           : "no retired index version has tables left on the reachable hosts";
    PrintJson(out);
    if (!r.ok()) throw CLI::RuntimeError(1);
  });

  idx->add_subcommand("status", "versions, states and the index worker's lag")->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto defs = LoadDefsOrExit(cfg, *a);
    auto store = CellStore::Open(cfg);
    IndexCatalog catalog(store.get());
    nlohmann::json indexes = nlohmann::json::array();
    std::vector<std::string> topics;
    for (const auto& d : defs) {
      auto versions = OrFail(catalog.Versions(d.table));
      nlohmann::json vs = nlohmann::json::array();
      for (const auto& v : versions)
        vs.push_back({{"version", v.version},
                      {"state", IndexStateName(v.state)},
                      {"fingerprint", v.fingerprint},
                      {"created_at", FormatRfc3339(v.created_at)}});
      indexes.push_back({{"index", d.table},
                         {"datastore", d.datastore},
                         {"versions", vs},
                         {"definition_fingerprint", d.Fingerprint()}});
      topics.push_back(ChangeLogTopic(cfg.kafka, d.datastore));
    }
    nlohmann::json out = {{"indexes", indexes}};
    if (!cfg.kafka.brokers.empty()) {
      auto lag = ReadGroupLag(cfg, IndexerGroup(cfg.kafka), topics);
      if (lag.ok())
        out["worker_lag_events"] = lag->total;
      else
        out["worker_lag_error"] = lag.status().ToString();
    }
    PrintJson(out);
  });
  // `--indexes` may follow the command too (`cellar index apply --indexes DIR`).
  for (CLI::App* sub : idx->get_subcommands({})) sub->fallthrough();
}

}  // namespace cellar::cli
