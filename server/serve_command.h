// The worker node's command line, shared by `cellard` and `cellar serve`:
// flags, then load the tokens, open the store, serve until SIGTERM/SIGINT and
// stop gracefully (in-flight requests finish, then the store's writers stop).
//
//   --listen HOST:PORT      address to serve on (default 127.0.0.1:8080; port 0 = any)
//   --tokens FILE           bearer tokens with per-datastore scopes (token_auth.h);
//                           without it every request is allowed
//   --tls-cert F --tls-key F  serve HTTPS with this PEM certificate chain and key
//   --threads N             connections served at once (default 64)
//   --max-request-bytes N   request body limit (default 2 MiB)
//   --max-batch-cells N     cells per batch request (default: the config's limits.max_batch_cells)
//   --read-timeout-ms N     a client that stops sending mid-request is answered 400 after this
//   --indexes PATH          index definitions (file or directory) whose queries to
//                           serve at GET /v1/<ds>/indexes/<name> (default: none)
//   --ready-file FILE       once listening, write "HOST:PORT\n" there (for scripts and tests)
//
// With `purge: { interval: ... }` in the config the node also runs the
// background purge (retention/purge_scheduler.h), exporting its metrics at
// /metrics, and stops it first on a signal.
//
// Exit codes: 0 after a signal-driven stop, 1 when serving failed (cannot
// bind), 2 for bad flags, config, tokens or index definitions.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "config/cluster_config.h"

namespace cellar {

struct ServeFlags {
  std::string listen = "127.0.0.1:8080";
  std::string tokens_file;
  std::string tls_cert, tls_key;
  int threads = 64;
  int64_t max_request_bytes = 2 << 20;
  int max_batch_cells = 0;
  int read_timeout_ms = 10000;
  std::string ready_file;
  std::string indexes_path;
};

// Adds the flags above to `cmd`.
void AddServeFlags(CLI::App* cmd, ServeFlags* flags);

// Serves `config` until SIGTERM/SIGINT. Blocks those signals in the calling
// thread first: call it before this process starts any other thread.
int RunServe(const ClusterConfig& config, const ServeFlags& flags);

}  // namespace cellar
