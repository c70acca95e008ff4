#include "server/serve_command.h"

#include <iostream>
#include <memory>
#include <optional>

#include "api/cell_api.h"
#include "api/index_backend.h"
#include "api/token_auth.h"
#include "base/atomic_file.h"
#include "base/host_port.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/signal_wait.h"
#include "cells/cell_store.h"
#include "config/command_line.h"
#include "config/number_options.h"
#include "indexes/index_definition.h"
#include "retention/purge_scheduler.h"
#include "server/http_server.h"

namespace cellar {

void AddServeFlags(CLI::App* cmd, ServeFlags* f) {
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--tokens", f->tokens_file,
                  "YAML file of bearer tokens and their datastore scopes (default: no auth)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", f->tls_cert, "PEM certificate (chain): serve HTTPS")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd->add_option("--threads", f->threads, "connections served at once")
      ->transform(DecimalInteger<int>(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", f->max_request_bytes, "request body limit in bytes")
      ->transform(DecimalInteger<int64_t>(1024, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-batch-cells", f->max_batch_cells,
                  "cells per batch request (default: limits.max_batch_cells)")
      ->transform(DecimalInteger<int>(1, 100000));
  cmd->add_option("--read-timeout-ms", f->read_timeout_ms,
                  "how long to wait for the rest of a request")
      ->transform(DecimalInteger<int>(100, 600000))
      ->capture_default_str();
  cmd->add_option("--indexes", f->indexes_path,
                  "index definition file or directory whose queries to serve")
      ->check(CLI::ExistingPath);
  cmd->add_option("--ready-file", f->ready_file, "write HOST:PORT to this file once listening");
}

int RunServe(const ClusterConfig& config, const ServeFlags& f) {
  BlockTerminationSignals();
  HttpServerOptions options;
  Result<HostPort> listen = ParseHostPort(f.listen, "--listen");
  if (!listen.ok()) {
    std::cerr << "cellard: " << listen.status().message() << "\n";
    return kUsageExitCode;
  }
  options.host = listen->host;
  options.port = listen->port;
  options.tls_cert_file = f.tls_cert;
  options.tls_key_file = f.tls_key;
  options.threads = f.threads;
  options.read_timeout_ms = f.read_timeout_ms;
  // One registry for GET /metrics: the server's, the group commit's and the
  // index queries' metrics. Declared before the store, which updates it until destroyed.
  MetricsRegistry metrics;
  options.metrics = &metrics;

  std::optional<TokenTable> tokens;
  if (!f.tokens_file.empty()) {
    auto t = TokenTable::Load(f.tokens_file);
    if (!t.ok()) {
      std::cerr << "cellard: invalid tokens file:\n" << t.status().message() << "\n";
      return kUsageExitCode;
    }
    tokens = std::move(t).value();
  } else {
    LogWarn("http", "no --tokens file: every request is allowed without a token");
  }

  std::vector<IndexDefinition> indexes;
  if (!f.indexes_path.empty()) {
    auto defs = LoadIndexDefinitions(f.indexes_path, config);
    if (!defs.ok()) {
      std::cerr << "cellard: invalid index definitions:\n" << defs.status().message() << "\n";
      return kUsageExitCode;
    }
    indexes = std::move(defs).value();
  }

  std::unique_ptr<CellStore> store = CellStore::Open(config, &metrics);
  // A cluster still in the per-shard layout is refused (a host that is down
  // is not: the node starts and answers Unavailable for its shards).
  if (Status layout = store->CheckLayout(); layout.code() == StatusCode::kFailedPrecondition) {
    std::cerr << "cellard: " << layout.ToString() << "\n";
    return 1;
  }
  std::unique_ptr<IndexBackend> index_backend =
      NewIndexBackend(store.get(), std::move(indexes), &metrics);
  CellApiOptions api_options;
  api_options.max_request_bytes = f.max_request_bytes;
  api_options.max_batch_cells = f.max_batch_cells;
  CellApi api(config, store.get(), tokens ? &*tokens : nullptr, api_options, index_backend.get());

  auto server = HttpServer::Start(&api, options);
  if (!server.ok()) {
    std::cerr << "cellard: " << server.status().ToString() << "\n";
    return server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  // The background purge (config `purge.interval`), its metrics beside the
  // HTTP ones. Several nodes may run it: one purges a host at a time.
  std::optional<PurgeScheduler> purge;
  if (config.purge.interval_ms > 0) {
    purge.emplace(store.get(), &(*server)->metrics());
    if (Status s = purge->Start(); !s.ok()) {
      std::cerr << "cellard: " << s.ToString() << "\n";
      (*server)->Stop();
      store->Close();
      return 1;
    }
  }
  const std::string bound = FormatHostPort(options.host, (*server)->port());
  if (!f.ready_file.empty()) WriteFileAtomically(f.ready_file, bound + "\n").IgnoreError();
  int sig = 0;
  while ((sig = WaitForTerminationSignal(1000)) == 0) {
  }
  LogInfo("http", "signal received; stopping", {{"signal", std::to_string(sig)}});
  if (purge) purge->Stop();
  (*server)->Stop();
  store->Close();
  LogInfo("http", "stopped", {{"address", bound}});
  return 0;
}

}  // namespace cellar
