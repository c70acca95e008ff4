// Statements and COMMITs this process sent to MariaDB, by the name of the
// thread that sent them: which of a process's stages (relay, index worker,
// group-commit writers, ...) drives the server's statements and
// transactions. The server's own counters (GLOBAL_STATUS) see only the sum
// of every client; `cellar-bench pipeline` reports these per write by thread
// group (docs/cost-per-write.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace cellar {

struct SqlCallCounts {
  // Every statement sent (MysqlConnection: prepared executions, text
  // statements such as SET, START TRANSACTION, COMMIT and ROLLBACK), whether
  // or not the server accepted it; statement prepares are not counted (as in
  // the server's Questions).
  uint64_t statements = 0;
  // COMMITs the server acknowledged.
  uint64_t commits = 0;
};

// Counts since the process started, by the name the sending thread had when
// it sent its first statement (base/thread_name.h; an unnamed thread has the
// program's name). Threads of one name add up, and a thread that ended keeps
// its counts. Thread-safe; a snapshot that statements in flight may or may
// not be part of.
std::map<std::string, SqlCallCounts> SqlCallCountsByThreadName();

// For MysqlConnection (mysql_client.cc): one statement, one acknowledged
// COMMIT sent by the calling thread. Thread-safe; after a thread's first
// call, a relaxed atomic increment and no lock.
void CountSqlStatement();
void CountSqlCommit();

}  // namespace cellar
