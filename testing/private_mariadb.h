// PrivateMariaDb: a throw-away MariaDB server for one test binary.
//
// Start() initialises a fresh data directory under $TMPDIR (or /tmp) with
// mariadb-install-db and runs /usr/sbin/mariadbd on a free 127.0.0.1 port.
// The server has a passwordless root account reachable over TCP from
// 127.0.0.1, no binary log, and InnoDB's durable defaults
// (innodb_flush_log_at_trx_commit=1), so Kill() + Restart() models a crash.
//
// The server is a child of this process. It is started with
// PR_SET_PDEATHSIG=SIGKILL, so it dies if the *thread* that called
// Start()/Restart() exits (or the process crashes): call those from a thread
// that outlives the server, e.g. the test's main thread.
//
// Thread safety: Execute() may be called concurrently; everything else must be
// serialised by the caller.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cellar::testing {

// InnoDB sizing. The defaults keep test servers small and quick to create;
// benchmarks ask for production-like sizes, so that a redo log filling up
// (which forces InnoDB into synchronous flushing) does not dominate latency.
struct PrivateMariaDbOptions {
  std::string innodb_log_file_size = "64M";
  std::string innodb_buffer_pool_size = "128M";
  // TLS: the server's --ssl-ca, --ssl-cert and --ssl-key files (all three or
  // none; the test makes them). With them, require_secure_transport makes the
  // server refuse plain TCP logins. The probes and Execute() then connect
  // with TLS (`mariadb --ssl`, the certificate unchecked).
  std::string ssl_ca{};
  std::string ssl_cert{};
  std::string ssl_key{};
  bool require_secure_transport = false;
  // Replication. A server_id > 0 makes a server ready to be a primary or a
  // replica of a Cellar host (docs/design.md, "Replicas and failover"): binary log in
  // ROW format with GTIDs in strict mode, log_slave_updates, semi-synchronous
  // replication enabled both ways with the lossless wait point AFTER_SYNC, and
  // read_only from the start (a promotion makes the primary writable). 0: no
  // binary log, writable (a host without replicas).
  uint32_t server_id = 0;
  // --init-rpl-role: "" (the server's default) or "SLAVE", with which a
  // crashed primary rolls back the binlog tail no replica acknowledged instead
  // of committing it in crash recovery.
  std::string init_rpl_role{};
  // rpl_semi_sync_master_timeout, milliseconds: how long a primary waits for a
  // replica's acknowledgement before it falls back to asynchronous replication.
  int semi_sync_timeout_ms = 10000;
};

class PrivateMariaDb {
 public:
  // Creates the data directory and starts the server, waiting (up to ~30 s)
  // until it answers a query. `label` names the temp dir and log lines.
  // On failure throws std::runtime_error carrying the tail of the server's
  // error log; nothing is left running and the temp dir is removed.
  static std::unique_ptr<PrivateMariaDb> Start(const std::string& label = "db",
                                               PrivateMariaDbOptions options = {});

  // Stops the server if it is running and removes the temp dir, unless the
  // environment variable CELLAR_KEEP_TEST_DIRS is set (then it is kept and
  // its path printed on stderr).
  ~PrivateMariaDb();

  PrivateMariaDb(const PrivateMariaDb&) = delete;
  PrivateMariaDb& operator=(const PrivateMariaDb&) = delete;

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1"; }
  std::string dir() const { return dir_; }  // temp dir; data lives in dir()/data
  const std::string& label() const { return label_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL and reap: a crash. The port refuses connections on return. No-op if not running.
  void Kill();
  // SIGTERM (clean shutdown), waiting up to 30 s, then SIGKILL. No-op if not running.
  void Stop();
  // Stops the server if running, then starts it again on the same port and
  // data directory and waits until it answers a query (crash recovery
  // included). Throws std::runtime_error on failure (e.g. the port was taken
  // by someone else meanwhile).
  void Restart();
  // The options the next Restart() uses (e.g. init_rpl_role after a crash).
  PrivateMariaDbOptions& options() { return options_; }

  // Runs `sql` (one or more ';'-separated statements) as root with the
  // `mariadb` command-line client. Returns true when the client exits 0.
  // If `output` is non-null it receives the result rows as `mariadb --batch`
  // prints them (tab-separated, one per line, NULL as "NULL", \t \n \\ escaped),
  // without column names. On failure the client's error message is
  // written to stderr.
  bool Execute(const std::string& sql, std::string* output = nullptr) const;

  // The server's global status variable `name` (e.g. "Handler_update",
  // case-insensitive) as a number; -1 when it cannot be read (unknown name,
  // server down: the client's error is on stderr).
  int64_t GlobalStatus(const std::string& name) const;

 private:
  PrivateMariaDb() = default;

  // Spawns mariadbd on port_ and waits until it is ready. Returns "" on
  // success, otherwise a description of the failure; `port_in_use` is set
  // when the server failed because the port was taken.
  std::string Launch(bool* port_in_use);
  // argv of the `mariadb` client for root over TCP to this server, up to the SQL.
  std::vector<std::string> ClientArgs(int connect_timeout_s) const;
  std::string ErrorLogTail() const;

  std::string label_;
  PrivateMariaDbOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace cellar::testing
