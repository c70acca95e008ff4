// `cellar log tail` and `cellar relay status`.
#include "base/signal_wait.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/relay.h"
#include "workers/cli/cli_common.h"

namespace cellar::cli {

void AddChangeLogCommands(CLI::App& app, const GlobalOptions& g) {
  CLI::App* log = app.get_subcommand("log");
  auto* tail = log->add_subcommand("tail", "print change-log events from Kafka");
  auto datastore = std::make_shared<std::string>();
  auto from_beginning = std::make_shared<bool>(false);
  auto max_events = std::make_shared<long>(-1);
  auto idle_exit_ms = std::make_shared<int>(-1);
  tail->add_option("-d,--datastore", *datastore, "datastore name")->required();
  tail->add_flag("--from-beginning", *from_beginning, "start at the oldest retained event");
  tail->add_option("-n,--max-events", *max_events, "exit after this many events")
      ->transform(DecimalInteger<long>());
  tail->add_option("--idle-exit-ms", *idle_exit_ms, "exit after this long without events")
      ->transform(DecimalInteger<int>());
  tail->callback([=, &g] {
    BlockTerminationSignals();  // before librdkafka starts its threads
    ClusterConfig cfg = LoadConfigOrExit(g);
    ConsumerOptions opts;
    opts.from_beginning = *from_beginning;
    auto consumer = OrFail(ChangeLogConsumer::Create(cfg, {*datastore}, opts));
    long seen = 0;
    int idle = 0;
    while (*max_events < 0 || seen < *max_events) {
      if (WaitForTerminationSignal(0)) break;
      auto ev = consumer->Poll(200);
      if (!ev.ok()) {
        Fail(ev.status());
        continue;
      }
      if (!ev->has_value()) {
        idle += 200;
        if (*idle_exit_ms >= 0 && idle >= *idle_exit_ms) break;
        continue;
      }
      idle = 0;
      const ConsumedEvent& e = **ev;
      nlohmann::json j = CellToJson(e.event.cell);
      j["datastore"] = e.event.datastore;
      j["partition"] = e.partition;
      j["offset"] = e.offset;
      if (e.event.body_omitted) j["body_omitted"] = true;
      PrintJson(j);
      ++seen;
    }
  });

  auto* relay = app.add_subcommand("relay", "change-log relay commands");
  relay->require_subcommand(1);
  relay->add_subcommand("status", "per stream (host, datastore): checkpoint, head, lag, owner")
      ->callback([&g] {
        ClusterConfig cfg = LoadConfigOrExit(g);
        auto store = CellStore::Open(cfg);
        nlohmann::json rows = nlohmann::json::array();
        uint64_t total_lag = 0;
        int errors = 0;
        for (const auto& s : ReadRelayStatus(*store)) {
          nlohmann::json r = {{"host", s.host},
                              {"datastore", s.datastore},
                              {"checkpoint", s.checkpoint},
                              {"head", s.head},
                              {"lag", s.lag},
                              {"owned", s.owned}};
          if (s.checkpoint_updated_at)
            r["checkpoint_updated_at"] = FormatRfc3339(s.checkpoint_updated_at);
          if (!s.error.empty()) {
            r["error"] = s.error;
            ++errors;
          }
          total_lag += s.lag;
          rows.push_back(r);
        }
        PrintJson({{"streams", rows}, {"total_lag", total_lag}});
        if (errors) throw CLI::RuntimeError(1);
      });
}

}  // namespace cellar::cli
