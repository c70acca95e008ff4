// The write fence: how a host's log stays gap-free for readers while its
// writers never wait for each other.
//
// The problem. A host's cells table is its log, ordered by the auto-increment
// added_id. InnoDB hands out added_ids when a row is inserted, not when its
// transaction commits, so a reader that sees added_id 101 committed may still
// see 100 commit later (or never: a rolled-back or failed insert leaves a
// permanent gap). A log reader that moved past 100 would skip it for good.
//
// The mechanism. Table write_fence in the host database has one row per
// writer connection (conn_id = CONNECTION_ID()), created and committed when
// the connection becomes a writer (RegisterWriter). Every transaction that
// inserts cells locks its own row before it allocates any added_id and holds
// that lock until it commits or rolls back, in one of two ways:
//   - EnterWriteFence: SELECT ... FOR UPDATE as the transaction's first
//     statement (one more round trip);
//   - FencedCreatedAt: inside the INSERT itself. The first row's created_at
//     is IF((SELECT conn_id ... FOR UPDATE) IS NULL, NULL, ?). MariaDB
//     evaluates that uncorrelated subquery while it optimises the statement,
//     before it writes any row, i.e. before InnoDB hands out any added_id
//     (measured: an INSERT blocked on its fence row got ids above those of a
//     writer that committed meanwhile, as a text and as a prepared statement,
//     under READ COMMITTED and REPEATABLE READ). So a group commit of one
//     datastore is ONE autocommit statement: one round trip instead of three.
// Writers lock different rows: they never wait for each other.
//
// The argument (why a reader cannot skip a committed cell). A reader reads the
// committed cells above its position and sees M as the highest. Any added_id
// X < M was allocated before M (auto-increment values grow monotonically on
// one server), and M was committed before the read, so X's transaction had
// already locked its fence row before the read. WaitForOpenWriters, called
// after the read, waits for every fence row locked at that moment. Once it
// returns, X's transaction has committed (a new read sees X) or rolled back
// (X never appears). So after the wait, re-reading up to M returns every cell
// <= M that will ever exist. A reader also needs no wait at all for a range
// whose added_ids are contiguous: no id is missing, so none can appear.
//
// Why not information_schema.INNODB_TRX (the "open transactions" watermark):
// it is a cache that InnoDB refreshes only after 100 ms without a read, so a
// relay polling it every few ms never sees a transaction that began after
// the last refresh (measured: a writer held open for 2 s was never listed
// when polled every 10 ms). Why not the binlog: it needs log_bin in ROW format
// on every host and a replication client; the fence needs neither.
//
// Read-only transactions (a consistent backup) take no fence lock and never
// hold readers back. A writer held open holds back readers of its host (they
// cannot know whether it will commit) but no other writer.
//
// Threading: the functions use only the connection they are given.
#pragma once

#include <string>

#include "base/status.h"
#include "cells/mysql_client.h"

namespace cellar::internal {

// DDL for the fence table of a host database (idempotent).
std::string CreateWriteFenceSql(const std::string& database);

// Makes `conn` a writer of `database`: inserts and commits its fence row, and
// deletes the rows of connections that no longer exist on the server. Adds
// STRICT_ALL_TABLES to the session's sql_mode, so that a NULL created_at
// (FencedCreatedAt without a fence row) fails the INSERT instead of being
// stored as 0 with a warning. Fence rows stay out of the binary log (they
// name this server's connections; replicas must not apply them).
// A failover deletes a demoted primary's fence rows (host_servers.h).
// REQUIRES: no transaction is open on `conn`.
[[nodiscard]] Status RegisterWriter(MysqlConnection& conn, const std::string& database);

// Inside the transaction about to insert cells: locks this connection's fence
// row (held until COMMIT/ROLLBACK). FailedPrecondition when the row is gone
// (the caller rolls back, RegisterWriter()s again and retries); Internal
// naming `cellar init` when the table is missing.
// REQUIRES: the first statement of the transaction.
[[nodiscard]] Status EnterWriteFence(MysqlConnection& conn, const std::string& database);

// The SQL for the created_at placeholder of the FIRST row of a cells INSERT
// that locks this connection's fence row itself (see above); it takes the
// same one `?` parameter as a plain placeholder. Later INSERTs of the same
// transaction may use it too (the lock is already held).
std::string FencedCreatedAt(const std::string& database);

// `st` from an INSERT using FencedCreatedAt, translated: FailedPrecondition
// when this connection's fence row is gone (the caller RegisterWriter()s again
// and retries), Internal naming `cellar init` when the fence table is missing,
// any other status unchanged.
Status FencedInsertStatus(const Status& st, const std::string& database);

// Waits until every transaction that holds a fence row of `database` right
// now has ended. OK once they all have; DeadlineExceeded when one is still
// open after `max_wait_s` seconds (the caller retries later). Other errors
// from the connection as they are.
// REQUIRES: `conn` is in autocommit mode with no transaction open.
[[nodiscard]] Status WaitForOpenWriters(MysqlConnection& conn, const std::string& database,
                                        int max_wait_s);

}  // namespace cellar::internal
