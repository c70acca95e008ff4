// `cellar trigger status | pause | resume | replay | dlq list | dlq retry`.
#include <httplib.h>

#include <sstream>

#include "changelog/consumer_groups.h"
#include "triggers/trigger_admin.h"
#include "triggers/trigger_control.h"
#include "triggers/trigger_worker.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {
namespace {

struct TriggerArgs {
  std::string name, datastore, triggers_path, from = "beginning", metrics_url, reason;
};

// The datastore of `name`: --datastore, or looked up in --triggers.
Result<std::string> DatastoreOf(const ClusterConfig& cfg, const TriggerArgs& a) {
  if (!a.datastore.empty()) return a.datastore;
  if (!a.triggers_path.empty()) {
    CELLAR_ASSIGN_OR_RETURN(auto defs, LoadTriggerDefinitions(a.triggers_path, cfg));
    for (const auto& d : defs)
      if (d.name == a.name) return d.datastore;
  }
  if (cfg.datastores.size() == 1) return cfg.datastores[0].name;
  return InvalidArgument("say which datastore trigger '" + a.name +
                         "' reads: --datastore, or --triggers with its definition");
}

// Lines of a Prometheus scrape that belong to trigger `name`.
std::vector<std::string> ScrapeTrigger(const std::string& url, const std::string& name) {
  std::vector<std::string> out;
  auto scheme_end = url.find("://");
  auto path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  httplib::Client c(url.substr(0, path_start));
  c.set_connection_timeout(2, 0);
  auto res = c.Get(path_start == std::string::npos ? "/metrics" : url.substr(path_start).c_str());
  if (!res || res->status != 200) return {"(metrics unavailable at " + url + ")"};
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line))
    if (line.find("trigger=\"" + name + "\"") != std::string::npos) out.push_back(line);
  return out;
}

}  // namespace

void AddTriggerCommands(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<TriggerArgs>();
  auto* trig = app.add_subcommand("trigger", "trigger commands");
  trig->require_subcommand(1);
  auto common = [a](CLI::App* c) {
    c->add_option("name", a->name, "trigger name")->required();
    c->add_option("-d,--datastore", a->datastore, "datastore the trigger reads");
    c->add_option("--triggers", a->triggers_path, "trigger definitions (YAML)");
  };

  auto* status = trig->add_subcommand("status", "lag per partition, dead letters, live metrics");
  common(status);
  status->add_option("--metrics-url", a->metrics_url, "a running worker's /metrics URL");
  status->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto ds = OrFail(DatastoreOf(cfg, *a));
    auto lag = OrFail(ReadTriggerLag(cfg, ds, a->name));
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& p : lag.partitions)
      parts.push_back({{"topic", p.topic},
                       {"partition", p.partition},
                       {"committed", p.committed},
                       {"end", p.end},
                       {"lag", p.lag}});
    nlohmann::json out = {{"trigger", a->name},
                          {"group", TriggerGroup(cfg.kafka, a->name)},
                          {"partitions", parts},
                          {"total_lag", lag.total_lag},
                          {"dead_letters", lag.dead_letters}};
    // The shared pause state (trigger_control.h); Kafka's view stands without it.
    auto control = ReadTriggerControlOf(cfg, a->name);
    if (control.ok()) {
      out["paused"] = control->has_value() && (*control)->paused;
      if (control->has_value() && (*control)->paused) out["pause_reason"] = (*control)->reason;
    } else {
      out["paused"] = nullptr;
      out["control_error"] = control.status().ToString();
    }
    if (!a->metrics_url.empty()) out["metrics"] = ScrapeTrigger(a->metrics_url, a->name);
    PrintJson(out);
  });

  // Pause/resume need no datastore: a trigger's name is unique in the cluster.
  auto* pause = trig->add_subcommand(
      "pause", "stop handling events in every process running the trigger (no restart)");
  pause->add_option("name", a->name, "trigger name")->required();
  pause->add_option("--reason", a->reason, "why (shown by status)")
      ->default_val("paused by an operator");
  pause->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    OrFail(PauseTrigger(cfg, a->name, a->reason));
    PrintJson({{"trigger", a->name}, {"paused", true}, {"reason", a->reason}});
  });
  auto* resume = trig->add_subcommand(
      "resume", "continue a paused trigger (also one the dead-letter policy paused)");
  resume->add_option("name", a->name, "trigger name")->required();
  resume->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    OrFail(ResumeTrigger(cfg, a->name));
    PrintJson({{"trigger", a->name}, {"paused", false}});
  });

  auto* replay = trig->add_subcommand(
      "replay",
      "feed a webhook trigger from the cell tables (C++ triggers: their binary's --replay)");
  common(replay);
  replay->add_option("--from", a->from, "beginning | RFC 3339 time | shard:added_id,...")
      ->capture_default_str();
  replay->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    if (a->triggers_path.empty())
      OrFail(InvalidArgument("replay needs --triggers with the webhook definition"));
    auto defs = OrFail(LoadTriggerDefinitions(a->triggers_path, cfg));
    auto from = OrFail(ParseReplayFrom(a->from));
    TriggerWorker w(cfg);
    bool found = false;
    for (const auto& d : defs)
      if (d.name == a->name) {
        OrFail(w.on_webhook(d));
        found = true;
      }
    if (!found) OrFail(NotFound("no trigger '" + a->name + "' in " + a->triggers_path));
    OrFail(w.Replay(a->name, from));
    auto st = w.status();
    PrintJson({{"trigger", a->name}, {"replayed", true}});
  });

  auto* dlq = trig->add_subcommand("dlq", "the trigger's set-aside events");
  dlq->require_subcommand(1);
  auto* list = dlq->add_subcommand("list", "print every set-aside event");
  common(list);
  list->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto ds = OrFail(DatastoreOf(cfg, *a));
    auto letters = OrFail(ListDeadLetters(cfg, ds, a->name));
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : letters) out.push_back(nlohmann::json::parse(EncodeDeadLetter(d)));
    PrintJson(out);
  });
  auto* retry = dlq->add_subcommand(
      "retry", "send set-aside events (not sent before) back to the running trigger");
  common(retry);
  retry->callback([a, &g] {
    ClusterConfig cfg = LoadConfigOrExit(g);
    auto ds = OrFail(DatastoreOf(cfg, *a));
    auto n = OrFail(RetryDeadLetters(cfg, ds, a->name));
    PrintJson({{"trigger", a->name}, {"sent_for_retry", n}});
  });
}

}  // namespace cellar::cli
