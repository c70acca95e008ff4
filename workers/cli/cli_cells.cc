// `cellar init | put | get | latest | row | versions | log | erase | purge | shards`.
#include <iostream>
#include <iterator>
#include <optional>

#include "api/api_wire.h"
#include "cells/cell_store.h"
#include "cells/shard_map.h"
#include "cells/shard_move.h"
#include "retention/purger.h"
#include "triggers/trigger_control.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {
namespace {

struct CellArgs {
  std::string datastore, row, column, body, as_of, since;
  int64_t ref_key = -1;
  std::optional<int64_t> max_ref, min_ref, expected_ref;
  int limit = 100;
  uint32_t shard = 0;
  uint64_t after = 0;
  ReadPreference read = ReadPreference::kPrimary;  // get/latest/row/versions --read
  std::string read_after;  // get/latest/row/versions --after (a position token)
};

Result<nlohmann::json> ParseBody(const std::string& text) {
  std::string src = text;
  if (text == "-") src.assign(std::istreambuf_iterator<char>(std::cin), {});
  auto j = nlohmann::json::parse(src, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("--body is not valid JSON");
  return j;
}

}  // namespace

void AddCellCommands(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<CellArgs>();
  auto open = [&g] { return CellStore::Open(LoadConfigOrExit(g)); };
  auto add_addr = [a](CLI::App* c, bool column, bool ref) {
    c->add_option("-d,--datastore", a->datastore, "datastore name")->required();
    c->add_option("-r,--row", a->row, "row key (UUID)")->required();
    if (column) c->add_option("-c,--column", a->column, "column key")->required();
    if (ref)
      c->add_option("--ref", a->ref_key, "ref_key (>= 0)")
          ->transform(DecimalInteger<int64_t>())
          ->required();
  };

  // --read and --after of the reads (ReadOptions, cells/cell.h).
  auto add_read = [a](CLI::App* c) {
    AddReadOption(c, &a->read, "primary (default) or replica: a replica may be stale by its lag");
    c->add_option("--after", a->read_after,
                  "a position token a put printed: a replica read waits until it holds that write");
  };
  auto read_options = [a] {
    ReadOptions read;
    read.preference = a->read;
    read.after = a->read_after;
    return read;
  };

  app.add_subcommand("init", "create the host databases and tables (idempotent)")->callback([open] {
    auto store = open();
    OrFail(store->Init());
    OrFail(EnsureTriggerControlTable(store->config()));  // trigger pause/resume state
    PrintJson({{"initialised_shards", store->config().shards}});
  });

  auto* put = app.add_subcommand("put", "write one cell version");
  add_addr(put, true, true);
  put->add_option("-b,--body", a->body, "JSON object, or - for stdin")->required();
  put->callback([a, open] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    nlohmann::json body = OrFail(ParseBody(a->body));
    auto store = open();
    auto r = OrFail(store->Put(a->datastore, CellWrite{row, a->column, a->ref_key, body}));
    PrintJson(PutResultToJson(r, /*address=*/""));
  });

  auto* get = app.add_subcommand("get", "read one cell version");
  add_addr(get, true, true);
  add_read(get);
  get->callback([a, open, read_options] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    PrintJson(
        CellToJson(OrFail(open()->Get(a->datastore, row, a->column, a->ref_key, read_options()))));
  });

  auto* latest = app.add_subcommand("latest", "read the latest version of a column");
  add_addr(latest, true, false);
  add_read(latest);
  latest->callback([a, open, read_options] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    PrintJson(CellToJson(OrFail(open()->Latest(a->datastore, row, a->column, read_options()))));
  });

  auto* rowc = app.add_subcommand("row", "read the latest version of every column of a row");
  add_addr(rowc, false, false);
  add_read(rowc);
  rowc->callback([a, open, read_options] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    PrintJson(CellsToJson(OrFail(open()->Row(a->datastore, row, read_options()))));
  });

  auto* versions = app.add_subcommand("versions", "list versions of a column, newest first");
  add_addr(versions, true, false);
  versions->add_option("--max-ref", a->max_ref, "only ref_key <= this")
      ->transform(DecimalInteger<int64_t>());
  versions->add_option("--min-ref", a->min_ref, "only ref_key >= this")
      ->transform(DecimalInteger<int64_t>());
  versions->add_option("--as-of", a->as_of, "only versions created at or before (RFC 3339)");
  versions->add_option("--since", a->since, "only versions created at or after (RFC 3339)");
  versions->add_option("--limit", a->limit, "at most this many (1-10000)")
      ->transform(DecimalInteger<int>());
  add_read(versions);
  versions->callback([a, open, read_options] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    VersionQuery q;
    q.max_ref = a->max_ref;
    q.min_ref = a->min_ref;
    q.limit = a->limit;
    auto time = [](const std::string& option, const std::string& text) {
      Result<MicrosSinceEpoch> t = ParseRfc3339(text);
      if (!t.ok()) OrFail(InvalidArgument(option + ": " + t.status().message()));
      return *t;
    };
    if (!a->as_of.empty()) q.as_of = time("--as-of", a->as_of);
    if (!a->since.empty()) q.since = time("--since", a->since);
    PrintJson(
        CellsToJson(OrFail(open()->Versions(a->datastore, row, a->column, q, read_options()))));
  });

  auto* erase = app.add_subcommand(
      "erase", "append a tombstone to a column (created:false if it already reads as erased)");
  add_addr(erase, true, false);
  erase
      ->add_option("--expected-ref", a->expected_ref,
                   "erase only if this ref_key is the latest version (else Conflict)")
      ->transform(DecimalInteger<int64_t>());
  erase->callback([a, open] {
    const Uuid row = OrFail(Uuid::Parse(a->row));
    auto store = open();
    auto r = OrFail(store->Erase(a->datastore, row, a->column, a->expected_ref));
    PrintJson(PutResultToJson(r, /*address=*/""));
  });

  auto* log = app.add_subcommand("log", "read a shard's cells in added_id order (or: log tail)");
  log->add_option("-d,--datastore", a->datastore, "datastore name");
  auto* shard_opt = log->add_option("-s,--shard", a->shard, "shard number")
                        ->transform(DecimalInteger<uint32_t>());
  log->add_option("--after", a->after, "start after this added_id (default 0)")
      ->transform(DecimalInteger<uint64_t>());
  log->add_option("--limit", a->limit, "at most this many cells")->transform(DecimalInteger<int>());
  log->callback([a, open, log, shard_opt] {
    if (log->got_subcommand("tail")) return;  // handled by `log tail`
    if (a->datastore.empty() || shard_opt->count() == 0)
      OrFail(InvalidArgument("log needs --datastore and --shard (or use `log tail`)"));
    auto r = OrFail(open()->ShardLog(a->datastore, a->shard, a->after, a->limit));
    PrintJson({{"cells", CellsToJson(r.cells)}, {"next_after", r.next_after}});
  });

  auto* purge = app.add_subcommand(
      "purge",
      "delete expired versions of TTL columns the relay has published, with their index entries");
  purge->add_option("-d,--datastore", a->datastore, "datastore name")->required();
  purge->callback([a, open] {
    auto store = open();
    const PurgeReport r = OrFail(Purger(store.get()).Run(a->datastore));
    nlohmann::json hosts = nlohmann::json::array();
    for (const HostPurge& h : r.hosts) {
      nlohmann::json j = {{"host", h.host},
                          {"deleted", h.deleted},
                          {"held_back", h.held_back},
                          {"index_entries_removed", h.index_entries_removed}};
      j["published_up_to"] = h.published_up_to ? nlohmann::json(*h.published_up_to) : nullptr;
      if (h.busy) j["busy"] = true;
      if (!h.error.empty()) j["error"] = h.error;
      hosts.push_back(std::move(j));
    }
    // held_back: expired, but above the relay's published position: kept.
    PrintJson({{"datastore", r.datastore},
               {"deleted", r.deleted},
               {"held_back", r.held_back},
               {"index_entries_removed", r.index_entries_removed},
               {"hosts_busy", r.hosts_busy},
               {"hosts_failed", r.hosts_failed},
               {"hosts", hosts}});
    if (r.hosts_failed) throw CLI::RuntimeError(1);
  });

  auto* shards = app.add_subcommand("shards", "show the shard map (and a row's shard)");
  shards->add_option("-r,--row", a->row, "also print the shard of this row key");
  shards->callback([a, shards, &g] {
    if (shards->get_subcommands().size() > 0) return;  // `shards move` printed its own
    ClusterConfig cfg = LoadConfigOrExit(g);
    // Where each shard is now: the config's lists as moves changed them.
    const std::vector<uint32_t> placement = OrFail(CurrentShardHosts(cfg));
    nlohmann::json hosts = nlohmann::json::array();
    for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
      MysqlHostConfig now = cfg.mysql.hosts[h];
      now.shards.clear();
      for (uint32_t s = 0; s < cfg.shards; ++s)
        if (placement[s] == h) now.shards.push_back(s);
      hosts.push_back({{"name", now.name},
                       {"address", now.address + ":" + std::to_string(now.port)},
                       {"shards", now.ShardList()},
                       {"config_shards", cfg.mysql.hosts[h].ShardList()}});
    }
    nlohmann::json out = {{"shards", cfg.shards}, {"hosts", hosts}};
    if (!a->row.empty()) {
      const Uuid row = OrFail(Uuid::Parse(a->row));
      uint32_t s = ShardForRow(row, cfg.shards);
      const MysqlHostConfig& host = cfg.mysql.hosts[placement[s]];
      out["row"] = {{"row_key", row.ToString()},
                    {"shard", s},
                    {"database", cfg.HostDatabase(host)},
                    {"host", host.name}};
    }
    PrintJson(out);
  });
}

}  // namespace cellar::cli
