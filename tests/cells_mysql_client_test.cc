// The MySQL adapter (cells/mysql_client.h) against a real MariaDB, through
// libmariadb's binary protocol: every column type reads back as the server's
// text protocol shows it, parameters of every kind round-trip, long strings
// go as long data (a statement may carry more than max_allowed_packet in
// total), affected-row counts and errors map as the header says.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_name.h"
#include "cells/mysql_client.h"
#include "cells/schema_changes.h"
#include "cells/sql_call_counts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "testing/store_environment.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;

testing::StoreEnvironment* const env = static_cast<testing::StoreEnvironment*>(
    ::testing::AddGlobalTestEnvironment(new testing::StoreEnvironment({"adapter"}, 1)));

class MysqlClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, env->store) << "the shared MariaDB did not start";
    auto c = MysqlConnection::Connect(EndpointFor(env->config, env->config.mysql.hosts[0]));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conn_ = std::move(c).value();
    ASSERT_TRUE(conn_->ExecuteDdl("CREATE DATABASE IF NOT EXISTS adapter_test").ok());
  }
  MysqlConnection& conn() { return *conn_; }
  std::unique_ptr<MysqlConnection> conn_;
};

// Each column type reads as the text protocol (mysql CLI, SELECT ... INTO
// OUTFILE) would show it; SqlRow's accessors parse that text.
TEST_F(MysqlClientTest, EveryColumnTypeReadsAsTheServersText) {
  ASSERT_TRUE(conn().ExecuteDdl("DROP TABLE IF EXISTS adapter_test.types").ok());
  ASSERT_TRUE(conn()
                  .ExecuteDdl("CREATE TABLE adapter_test.types (ti TINYINT, us SMALLINT UNSIGNED,"
                              " i INT, big BIGINT, ubig BIGINT UNSIGNED, d DOUBLE, f FLOAT,"
                              " dec_ DECIMAL(10,3), dt DATETIME(6), dt0 DATETIME, ts TIMESTAMP(3),"
                              " da DATE, tm TIME(2), y YEAR, vc VARCHAR(20), bl BLOB, n INT)")
                  .ok());
  Result<uint64_t> inserted = conn().Execute(
      "INSERT INTO adapter_test.types VALUES (-128, 65535, -2147483648, ?, ?, ?, 0.5,"
      " -1234567.125, '2026-11-28 18:01:02.000305', '1999-12-31 23:59:59',"
      " '2026-01-02 03:04:05.678', '2026-02-28', '-838:59:59.50', 2026, 'héllo', ?, NULL)",
      {int64_t{INT64_MIN}, uint64_t{UINT64_MAX}, 0.1, std::string("\0\x01\xff", 3)});
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  EXPECT_EQ(1u, *inserted);

  Result<std::vector<SqlRow>> rows = conn().Query("SELECT * FROM adapter_test.types");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(1u, rows->size());
  const SqlRow& r = (*rows)[0];
  ASSERT_EQ(17u, r.size());
  EXPECT_EQ("-128", r.Bytes(0));
  EXPECT_EQ("65535", r.Bytes(1));
  EXPECT_EQ("-2147483648", r.Bytes(2));
  EXPECT_EQ(INT64_MIN, r.Int(3));
  EXPECT_EQ("-9223372036854775808", r.Bytes(3));
  EXPECT_EQ(UINT64_MAX, r.Uint(4));
  EXPECT_EQ("18446744073709551615", r.Bytes(4));
  EXPECT_EQ("0.1", r.Bytes(5));  // shortest text that reads back as the same double
  EXPECT_EQ(0.1, r.Double(5));
  EXPECT_EQ(0.5, r.Double(6));
  EXPECT_EQ("-1234567.125", r.Bytes(7));
  EXPECT_EQ("2026-11-28 18:01:02.000305", r.Bytes(8));
  EXPECT_EQ("1999-12-31 23:59:59", r.Bytes(9));
  EXPECT_EQ("2026-01-02 03:04:05.678", r.Bytes(10));
  EXPECT_EQ("2026-02-28", r.Bytes(11));
  EXPECT_EQ("-838:59:59.50", r.Bytes(12));
  EXPECT_EQ("2026", r.Bytes(13));
  EXPECT_EQ("héllo", r.Bytes(14));
  EXPECT_EQ(std::string("\0\x01\xff", 3), r.Bytes(15));
  EXPECT_TRUE(r.IsNull(16));
  EXPECT_FALSE(r.IsNull(15));

  // The same values through the text protocol, as a cross-check of the forms.
  Result<std::vector<SqlRow>> text_rows = conn().Query(
      "SELECT CAST(dt AS CHAR), CAST(ts AS CHAR), CAST(tm AS CHAR), CAST(d AS CHAR)"
      " FROM adapter_test.types");
  ASSERT_TRUE(text_rows.ok()) << text_rows.status().ToString();
  EXPECT_EQ((*text_rows)[0].Bytes(0), r.Bytes(8));
  EXPECT_EQ((*text_rows)[0].Bytes(1), r.Bytes(10));
  EXPECT_EQ((*text_rows)[0].Bytes(2), r.Bytes(12));
  EXPECT_EQ((*text_rows)[0].Bytes(3), r.Bytes(5));
}

// Empty strings are not NULL; empty results are empty; a result of many rows
// and wide values reads whole.
TEST_F(MysqlClientTest, EmptyValuesAndManyRowsReadWhole) {
  Result<std::vector<SqlRow>> empty =
      conn().Query("SELECT ?, ? FROM DUAL WHERE 1 = 0", {std::string(), int64_t{1}});
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  Result<std::vector<SqlRow>> blank = conn().Query("SELECT ?, NULL, ''", {std::string()});
  ASSERT_TRUE(blank.ok()) << blank.status().ToString();
  ASSERT_EQ(1u, blank->size());
  EXPECT_FALSE((*blank)[0].IsNull(0));
  EXPECT_EQ("", (*blank)[0].Bytes(0));
  EXPECT_TRUE((*blank)[0].IsNull(1));
  EXPECT_FALSE((*blank)[0].IsNull(2));

  Result<std::vector<SqlRow>> many = conn().Query(
      "SELECT seq, REPEAT(CHAR(65 + seq % 26), seq) FROM adapter_test.seq_1_to_2000 ORDER BY seq");
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  ASSERT_EQ(2000u, many->size());
  for (size_t i = 0; i < many->size(); ++i) {
    const SqlRow& r = (*many)[i];
    ASSERT_EQ(static_cast<int64_t>(i + 1), r.Int(0));
    ASSERT_EQ(std::string(i + 1, static_cast<char>('A' + (i + 1) % 26)), r.Bytes(1)) << i;
  }
}

// Strings over 256 KiB are sent as long data: one statement may carry more
// bytes than the server's max_allowed_packet, and each value arrives whole.
TEST_F(MysqlClientTest, LongStringsTravelAsLongDataBeyondMaxAllowedPacket) {
  Result<std::vector<SqlRow>> limit = conn().Query("SELECT @@max_allowed_packet");
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  const uint64_t max_packet = (*limit)[0].Uint(0);
  ASSERT_GT(max_packet, 0u);
  const size_t each = (size_t{1} << 20) + 7;  // 1 MiB and a few bytes: several chunks
  const size_t count = max_packet / each + 2;
  std::vector<std::string> values;
  for (size_t i = 0; i < count; ++i) {
    std::string v(each, static_cast<char>('a' + i % 26));
    v[each / 2] = '\0';
    values.push_back(std::move(v));
  }
  std::string sql = "SELECT ";
  std::vector<SqlParamView> params;
  for (size_t i = 0; i < count; ++i) {
    sql += std::string(i ? ", " : "") + "LENGTH(?), MD5(?)";
    params.emplace_back(std::string_view(values[i]));
    params.emplace_back(std::string_view(values[i]));
  }
  Result<std::vector<SqlRow>> rows = conn().QueryBorrowed(sql, params);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(1u, rows->size());
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(static_cast<int64_t>(each), (*rows)[0].Int(2 * i)) << "value " << i;
    Result<std::vector<SqlRow>> md5 = conn().Query("SELECT MD5(?)", {values[i]});
    ASSERT_TRUE(md5.ok()) << md5.status().ToString();
    EXPECT_EQ((*md5)[0].Bytes(0), (*rows)[0].Bytes(2 * i + 1)) << "value " << i;
  }
  // The connection is in step after it: the next statement runs.
  Result<std::vector<SqlRow>> next = conn().Query("SELECT ?", {int64_t{42}});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(42, (*next)[0].Int(0));
}

// Execute returns the rows the server changed (not the rows matched), and a
// statement's errors map to the header's codes without breaking the
// connection.
TEST_F(MysqlClientTest, AffectedRowsAndErrorsMapAsTheHeaderSays) {
  ASSERT_TRUE(conn().ExecuteDdl("DROP TABLE IF EXISTS adapter_test.kv").ok());
  ASSERT_TRUE(conn().ExecuteDdl("CREATE TABLE adapter_test.kv (k INT PRIMARY KEY, v INT)").ok());
  Result<uint64_t> ins =
      conn().Execute("INSERT INTO adapter_test.kv VALUES (?, ?), (?, ?), (?, ?)",
                     {int64_t{1}, int64_t{10}, int64_t{2}, int64_t{20}, int64_t{3}, int64_t{30}});
  ASSERT_TRUE(ins.ok()) << ins.status().ToString();
  EXPECT_EQ(3u, *ins);
  Result<uint64_t> same =
      conn().Execute("UPDATE adapter_test.kv SET v = ? WHERE k = ?", {int64_t{10}, int64_t{1}});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(0u, *same);
  Result<uint64_t> changed =
      conn().Execute("UPDATE adapter_test.kv SET v = v + ? WHERE k >= ?", {int64_t{1}, int64_t{2}});
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(2u, *changed);

  Result<uint64_t> dup =
      conn().Execute("INSERT INTO adapter_test.kv VALUES (?, ?)", {int64_t{1}, int64_t{0}});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(StatusCode::kConflict, dup.status().code()) << dup.status().ToString();
  EXPECT_THAT(dup.status().message(), HasSubstr("(error 1062)"));

  Result<std::vector<SqlRow>> bad = conn().Query("SELEKT 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(StatusCode::kInternal, bad.status().code()) << bad.status().ToString();
  EXPECT_THAT(bad.status().message(), HasSubstr("adapter"));  // names the host

  Result<std::vector<SqlRow>> arity = conn().Query("SELECT ?, ?", {int64_t{1}});
  ASSERT_FALSE(arity.ok());
  EXPECT_EQ(StatusCode::kInternal, arity.status().code());
  EXPECT_THAT(arity.status().message(), HasSubstr("2 placeholders but was given 1"));

  EXPECT_FALSE(conn().broken());
  Result<std::vector<SqlRow>> after = conn().Query("SELECT COUNT(*) FROM adapter_test.kv");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(3, (*after)[0].Int(0));
}

// An INSERT ... RETURNING whose row fails after the server sent the result's
// metadata: the error is reported, and the same statement and the connection
// run again at once (libmariadb would otherwise wait for packets that never
// come, until the read timeout broke the connection).
TEST_F(MysqlClientTest, AnErrorInsideAResultLeavesTheStatementReusable) {
  ASSERT_TRUE(conn().ExecuteDdl("DROP TABLE IF EXISTS adapter_test.nn").ok());
  ASSERT_TRUE(conn()
                  .ExecuteDdl("CREATE TABLE adapter_test.nn (id INT AUTO_INCREMENT PRIMARY KEY,"
                              " v INT NOT NULL)")
                  .ok());
  ASSERT_TRUE(conn().ExecuteDdl("SET SESSION sql_mode = 'STRICT_ALL_TABLES'").ok());
  const std::string sql = "INSERT INTO adapter_test.nn (v) VALUES (?), (?) RETURNING id, v";
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 3; ++round) {
    Result<std::vector<SqlRow>> failed = conn().Query(sql, {int64_t{1}, nullptr});
    ASSERT_FALSE(failed.ok()) << "round " << round;
    EXPECT_EQ(StatusCode::kInternal, failed.status().code()) << failed.status().ToString();
    EXPECT_THAT(failed.status().message(), HasSubstr("cannot be null"));
    EXPECT_FALSE(conn().broken());
    Result<std::vector<SqlRow>> ok = conn().Query(sql, {int64_t{2}, int64_t{3}});
    ASSERT_TRUE(ok.ok()) << "round " << round << ": " << ok.status().ToString();
    ASSERT_EQ(2u, ok->size());
    EXPECT_EQ(2, (*ok)[0].Int(1));
    EXPECT_EQ(3, (*ok)[1].Int(1));
  }
  // Far below the 10 s read timeout that a stuck read would have waited for.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  Result<std::vector<SqlRow>> count = conn().Query("SELECT COUNT(*) FROM adapter_test.nn");
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(6, (*count)[0].Int(0));
}

// A statement re-run with other values binds afresh each time (the cached
// statement and the reused bind array carry nothing over), and a long value
// followed by a short one in the same placeholder is not mixed up.
TEST_F(MysqlClientTest, ACachedStatementBindsAfreshOnEveryRun) {
  const std::string sql = "SELECT ?, LENGTH(?), ?";
  const std::string big(300 << 10, 'x');
  Result<std::vector<SqlRow>> a = conn().Query(sql, {int64_t{1}, big, std::string("one")});
  Result<std::vector<SqlRow>> b = conn().Query(sql, {nullptr, std::string("ab"), 2.5});
  Result<std::vector<SqlRow>> c = conn().Query(sql, {uint64_t{7}, big, std::string("three")});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok())
      << a.status().ToString() << b.status().ToString() << c.status().ToString();
  EXPECT_EQ("1", (*a)[0].Bytes(0));
  EXPECT_EQ(static_cast<int64_t>(big.size()), (*a)[0].Int(1));
  EXPECT_EQ("one", (*a)[0].Bytes(2));
  EXPECT_TRUE((*b)[0].IsNull(0));
  EXPECT_EQ(2, (*b)[0].Int(1));
  EXPECT_EQ(2.5, (*b)[0].Double(2));
  EXPECT_EQ("7", (*c)[0].Bytes(0));
  EXPECT_EQ(static_cast<int64_t>(big.size()), (*c)[0].Int(1));
  EXPECT_EQ("three", (*c)[0].Bytes(2));
}

// Holds `n` leases of `pool` at once (a burst of n concurrent callers), then
// returns them all.
void Burst(MysqlHostPool& pool, int n) {
  std::vector<MysqlHostPool::Lease> leases;
  for (int i = 0; i < n; ++i) {
    auto lease = pool.Acquire();
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    leases.push_back(std::move(lease).value());
  }
}

// Bursts beyond keep_idle reuse the connections of the last burst instead of
// opening (and closing) one per call: with the surplus closed as it came
// back, 16 callers over 8 kept connections opened 8 connections per burst
// (cellar-bench http: ~100 connects a second, get p99 20 ms).
TEST_F(MysqlClientTest, APoolKeepsABurstsSurplusUntilItHasBeenIdleTheTimeout) {
  MysqlHostPool pool(EndpointFor(env->config, env->config.mysql.hosts[0]),
                     MysqlPoolLimits{/*keep_idle=*/2, /*surplus_idle_ms=*/60000});
  Burst(pool, 6);
  EXPECT_EQ(6u, pool.stats().opened);
  EXPECT_EQ(6u, pool.stats().idle);
  Burst(pool, 6);
  Burst(pool, 4);
  EXPECT_EQ(6u, pool.stats().opened) << "a burst within the timeout opened connections";
  EXPECT_EQ(6u, pool.stats().idle);
}

TEST_F(MysqlClientTest, APoolClosesTheSurplusOnceIdleTheTimeoutKeepingKeepIdle) {
  const int64_t timeout_ms = 200;
  MysqlHostPool pool(EndpointFor(env->config, env->config.mysql.hosts[0]),
                     MysqlPoolLimits{/*keep_idle=*/2, timeout_ms});
  Burst(pool, 5);
  ASSERT_EQ(5u, pool.stats().idle);
  // Expiry is the condition: nothing but time passing can bring it.
  std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + 50));
  Burst(pool, 1);  // the pool's next use closes what expired
  EXPECT_EQ(2u, pool.stats().idle) << "keep_idle connections stay, the expired surplus goes";
  EXPECT_EQ(5u, pool.stats().opened);

  MysqlHostPool eager(EndpointFor(env->config, env->config.mysql.hosts[0]),
                      MysqlPoolLimits{/*keep_idle=*/2, /*surplus_idle_ms=*/0});
  Burst(eager, 5);
  EXPECT_EQ(2u, eager.stats().idle) << "surplus_idle_ms 0 closes the surplus as it comes back";
}

// Schema changes (cells/schema_changes.h) run only for what is missing: a
// second call sends no DDL (the session's Com_ counters do not move).
TEST_F(MysqlClientTest, SchemaChangesRunOnlyForWhatIsMissing) {
  auto statements_run = [&](const std::string& counter) -> uint64_t {
    Result<std::vector<SqlRow>> r = conn().Query("SHOW SESSION STATUS LIKE '" + counter + "'");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->size() == 1 ? (*r)[0].Uint(1) : 0;
  };
  ASSERT_TRUE(conn().ExecuteDdl("DROP DATABASE IF EXISTS adapter_schema").ok());
  const uint64_t creates = statements_run("Com_create_db");
  ASSERT_OK(CreateDatabaseIfMissing(conn(), "adapter_schema"));
  ASSERT_OK(CreateDatabaseIfMissing(conn(), "adapter_schema"));
  EXPECT_EQ(creates + 1, statements_run("Com_create_db"));
  Result<std::vector<SqlRow>> charset = conn().Query(
      "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA"
      " WHERE SCHEMA_NAME = 'adapter_schema'");
  ASSERT_OK(charset.status());
  ASSERT_EQ(1u, charset->size());
  EXPECT_EQ("utf8mb4_bin", (*charset)[0].Bytes(0));

  // A table of an older version lacks two of the columns.
  ASSERT_TRUE(conn().ExecuteDdl("CREATE TABLE adapter_schema.t (id INT PRIMARY KEY, a INT)").ok());
  const std::vector<ColumnDefinition> columns = {
      {"a", "INT"}, {"b", "BIGINT NOT NULL DEFAULT 7"}, {"c", "TEXT NULL"}};
  const uint64_t alters = statements_run("Com_alter_table");
  ASSERT_OK(AddColumnsIfMissing(conn(), "adapter_schema", "t", columns));
  ASSERT_OK(AddColumnsIfMissing(conn(), "adapter_schema", "t", columns));
  EXPECT_EQ(alters + 1, statements_run("Com_alter_table"));
  ASSERT_OK(conn().Execute("INSERT INTO adapter_schema.t (id) VALUES (1)").status());
  Result<std::vector<SqlRow>> row = conn().Query("SELECT id, a, b, c FROM adapter_schema.t");
  ASSERT_OK(row.status());
  ASSERT_EQ(1u, row->size());
  EXPECT_EQ(7, (*row)[0].Int(2));
  EXPECT_TRUE((*row)[0].IsNull(3));
  ASSERT_TRUE(conn().ExecuteDdl("DROP DATABASE adapter_schema").ok());
}

// Each statement sent counts for the thread that sent it, by that thread's
// name: a statement the server rejects counts, one never sent (a prepare
// that failed, missing parameters) does not; only acknowledged COMMITs count
// as commits. Threads of one name add up, and ended threads keep their counts.
TEST_F(MysqlClientTest, StatementsAndCommitsCountForTheSendingThreadsName) {
  ASSERT_TRUE(conn().ExecuteDdl("DROP TABLE IF EXISTS adapter_test.counted").ok());
  ASSERT_TRUE(conn().ExecuteDdl("CREATE TABLE adapter_test.counted (k INT PRIMARY KEY)").ok());
  auto other = MysqlConnection::Connect(EndpointFor(env->config, env->config.mysql.hosts[0]));
  ASSERT_OK(other.status());
  const std::map<std::string, SqlCallCounts> before = SqlCallCountsByThreadName();
  auto delta = [&](const std::map<std::string, SqlCallCounts>& after, const std::string& name) {
    SqlCallCounts d = after.count(name) ? after.at(name) : SqlCallCounts{};
    if (before.count(name)) {
      d.statements -= before.at(name).statements;
      d.commits -= before.at(name).commits;
    }
    return d;
  };

  std::thread a([&] {
    NameThisThread("sqlcount-a");
    MysqlConnection& c = conn();
    ASSERT_OK(c.Begin());  // 1
    ASSERT_OK(
        c.Execute("INSERT INTO adapter_test.counted VALUES (?)", {int64_t{1}}).status());  // 2
    ASSERT_OK(c.Commit());                                              // 3, commit 1
    ASSERT_OK(c.Query("SELECT k FROM adapter_test.counted").status());  // 4
    // 5: sent, and rejected by the server.
    EXPECT_EQ(
        StatusCode::kConflict,
        c.Execute("INSERT INTO adapter_test.counted VALUES (?)", {int64_t{1}}).status().code());
    EXPECT_FALSE(c.Query("SELEKT 1").ok());                   // prepare fails: not sent
    EXPECT_FALSE(c.Query("SELECT ?, ?", {int64_t{1}}).ok());  // missing parameter: not sent
    ASSERT_OK(c.Begin());                                     // 6
    c.Rollback();                                             // 7
  });
  std::thread b([&] {
    NameThisThread("sqlcount-b");
    ASSERT_OK((*other)->ExecuteDdl("SET @counted = 1"));  // 1
    ASSERT_OK((*other)->Begin());                         // 2
    ASSERT_OK((*other)->Commit());                        // 3, commit 1
  });
  a.join();
  b.join();
  std::thread b_again([&] {  // a second thread of that name, after the first ended
    NameThisThread("sqlcount-b");
    ASSERT_OK((*other)->Query("SELECT 1").status());  // 4
  });
  b_again.join();

  const std::map<std::string, SqlCallCounts> after = SqlCallCountsByThreadName();
  EXPECT_EQ(7u, delta(after, "sqlcount-a").statements);
  EXPECT_EQ(1u, delta(after, "sqlcount-a").commits);
  EXPECT_EQ(4u, delta(after, "sqlcount-b").statements);
  EXPECT_EQ(1u, delta(after, "sqlcount-b").commits);
}

}  // namespace
}  // namespace cellar
