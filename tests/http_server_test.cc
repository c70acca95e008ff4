// The HTTP worker node end to end: real `cellard` processes over a private
// MariaDB. Every endpoint's happy path through cellar::Client and through raw
// HTTP requests, auth, TLS, metrics, and 503 when the shard host is down.
// (Bad requests: http_bad_request_test.cc; two servers: http_failover_test.cc.)
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cells/log_position.h"
#include "cells/shard_map.h"
#include "client/cellar_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "indexes/index_catalog.h"
#include "indexes/index_definition.h"
#include "indexes/index_maintenance.h"
#include "testing/test_certificates.h"
#include "tests/http_test_util.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr uint32_t kShards = 4;
const char* const kRwToken = "rw-token-0123456789abcdef";
const char* const kRoToken = "ro-token-0123456789abcdef";

class HttpEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      db = testing::PrivateMariaDb::Start("http");
    } catch (const std::exception& e) {
      FAIL() << "cannot start MariaDB: " << e.what();
    }
    config_path = testing::WriteTempFile(testing::MakeClusterYaml({db.get()}, kShards), ".yaml");
    auto cfg = LoadClusterConfig(config_path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    config = *cfg;
    store = CellStore::Open(config);
    ASSERT_TRUE(store->Init().ok());
    auto defs = LoadIndexDefinitions(indexes_path, config);
    ASSERT_TRUE(defs.ok()) << defs.status().ToString();
    index_def = defs->front();
    auto applied = IndexCatalog(store.get()).Apply(index_def);
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    server = testing::CellardProcess::Start(config_path, {"--indexes", indexes_path});
    ASSERT_NE(nullptr, server);
    setenv("CELLAR_HTTP_TEST_RW", kRwToken, 1);
    setenv("CELLAR_HTTP_TEST_RO", kRoToken, 1);
    const std::string tokens = testing::WriteTempFile(
        "tokens:\n"
        "  - name: writer\n"
        "    token_env: CELLAR_HTTP_TEST_RW\n"
        "    datastores: { trips: [read, write] }\n"
        "  - name: reader\n"
        "    token_env: CELLAR_HTTP_TEST_RO\n"
        "    datastores: { \"*\": [read] }\n",
        ".yaml");
    auth_server = testing::CellardProcess::Start(config_path, {"--tokens", tokens});
    ASSERT_NE(nullptr, auth_server);
  }
  void TearDown() override {
    auth_server.reset();
    server.reset();
    store.reset();
    db.reset();
  }

  std::unique_ptr<testing::PrivateMariaDb> db;
  const std::string indexes_path = std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes";
  IndexDefinition index_def;  // driver_partner_index, applied before the server starts
  std::string config_path;
  ClusterConfig config;
  std::unique_ptr<CellStore> store;
  std::unique_ptr<testing::CellardProcess> server, auth_server;
};

HttpEnv* const env = static_cast<HttpEnv*>(::testing::AddGlobalTestEnvironment(new HttpEnv));

std::unique_ptr<Client> MakeClient(const std::string& url, const std::string& token = "") {
  ClientOptions o;
  o.endpoints = {url};
  o.bearer_token = token;
  auto c = Client::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : nullptr;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(nullptr, env->server) << "the server did not start";
    client_ = MakeClient(env->server->url());
    raw_ = std::make_unique<httplib::Client>("127.0.0.1", env->server->port());
  }
  std::unique_ptr<Client> client_;
  std::unique_ptr<httplib::Client> raw_;
};

TEST_F(HttpServerTest, ClientPutGetLatestRowVersionsErase) {
  const Uuid row = Uuid::Random();
  auto put = client_->Put("trips", {row, "BASE", 1, {{"city", "SF"}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(put->created);
  EXPECT_EQ(ShardForRow(row, kShards), put->shard);
  auto again = client_->Put("trips", {row, "BASE", 1, {{"city", "SF"}}});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(put->added_id, again->added_id);
  auto conflict = client_->Put("trips", {row, "BASE", 1, {{"city", "LA"}}});
  EXPECT_EQ(StatusCode::kConflict, conflict.status().code()) << conflict.status().ToString();
  ASSERT_TRUE(client_->Put("trips", {row, "BASE", 2, {{"city", "NYC"}}}).ok());
  ASSERT_TRUE(client_->Put("trips", {row, "STATUS", 0, {{"s", "open"}}}).ok());

  auto got = client_->Get("trips", row, "BASE", 1);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(json({{"city", "SF"}}), got->body);
  EXPECT_EQ(row, got->row_key);
  EXPECT_EQ(put->added_id, got->added_id);
  EXPECT_EQ(StatusCode::kNotFound, client_->Get("trips", row, "BASE", 9).status().code());

  auto latest = client_->Latest("trips", row, "BASE");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(2, latest->ref_key);
  auto cells = client_->Row("trips", row);
  ASSERT_TRUE(cells.ok()) << cells.status().ToString();
  EXPECT_EQ(2u, cells->size());

  VersionQuery q;
  q.max_ref = 1;
  auto versions = client_->Versions("trips", row, "BASE", q);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  ASSERT_EQ(1u, versions->size());
  EXPECT_EQ(1, (*versions)[0].ref_key);
  // since: only versions created at or after a time (ref 2 was written last).
  auto newest = client_->Latest("trips", row, "BASE");
  ASSERT_TRUE(newest.ok()) << newest.status().ToString();
  VersionQuery since;
  since.since = newest->created_at;
  auto recent = client_->Versions("trips", row, "BASE", since);
  ASSERT_TRUE(recent.ok()) << recent.status().ToString();
  ASSERT_EQ(1u, recent->size());
  EXPECT_EQ(2, (*recent)[0].ref_key);
  since.since = put->created_at;
  recent = client_->Versions("trips", row, "BASE", since);
  ASSERT_TRUE(recent.ok()) << recent.status().ToString();
  EXPECT_EQ(2u, recent->size());
  since.as_of = *since.since - 1;
  EXPECT_EQ(StatusCode::kInvalidArgument,
            client_->Versions("trips", row, "BASE", since).status().code());

  // Replica reads with the put's position (this host has no replica: the
  // primary answers) through the client's read, after and the HTTP API.
  ReadOptions replica;
  replica.preference = ReadPreference::kReplica;
  replica.after = put->position;
  ASSERT_FALSE(replica.after.empty());
  auto from_replica = client_->Get("trips", row, "BASE", 1, replica);
  ASSERT_TRUE(from_replica.ok()) << from_replica.status().ToString();
  EXPECT_EQ(json({{"city", "SF"}}), from_replica->body);
  EXPECT_EQ(2, client_->Latest("trips", row, "BASE", replica)->ref_key);
  EXPECT_EQ(2u, client_->Row("trips", row, replica)->size());
  EXPECT_EQ(1u, client_->Versions("trips", row, "BASE", q, replica)->size());
  replica.after = "not-a-token";
  EXPECT_EQ(StatusCode::kInvalidArgument,
            client_->Latest("trips", row, "BASE", replica).status().code());

  auto erased = client_->Erase("trips", row, "BASE");
  ASSERT_TRUE(erased.ok()) << erased.status().ToString();
  EXPECT_EQ(3, erased->ref_key);
  EXPECT_EQ(StatusCode::kNotFound, client_->Latest("trips", row, "BASE").status().code());
  auto all = client_->Versions("trips", row, "BASE", VersionQuery{});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(3u, all->size());
  EXPECT_TRUE((*all)[0].tombstone);
}

TEST_F(HttpServerTest, ClientBatchAndShardLog) {
  const Uuid a = Uuid::Random(), b = Uuid::Random();
  ASSERT_TRUE(client_->Put("trips", {b, "BASE", 0, {{"v", "old"}}}).ok());
  std::vector<CellWrite> cells = {{a, "BASE", 0, {{"i", 0}}},
                                  {a, "STATUS", 0, {{"i", 1}}},
                                  {b, "STATUS", 0, {{"i", 2}}},
                                  {b, "BASE", 0, {{"v", "new"}}}};  // conflicts: row b fails
  auto results = client_->PutBatch("trips", cells);
  ASSERT_EQ(4u, results.size());
  EXPECT_TRUE(results[0].ok()) << results[0].status().ToString();
  EXPECT_TRUE(results[1].ok());
  EXPECT_EQ(StatusCode::kAborted, results[2].status().code()) << results[2].status().ToString();
  EXPECT_EQ(StatusCode::kConflict, results[3].status().code()) << results[3].status().ToString();
  EXPECT_EQ(StatusCode::kNotFound, client_->Latest("trips", b, "STATUS").status().code());

  const uint32_t shard = ShardForRow(a, kShards);
  uint64_t after = 0;
  int found = 0;
  for (int page = 0; page < 100; ++page) {
    auto log = client_->ShardLog("trips", shard, after, 2);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    if (log->cells.empty()) break;
    for (const Cell& c : log->cells) found += c.row_key == a;
    after = log->next_after;
  }
  EXPECT_EQ(2, found);
  EXPECT_TRUE(client_->Ready().ok());
}

TEST_F(HttpServerTest, RawHttpEveryEndpoint) {
  const Uuid row = Uuid::Random();
  const std::string cell = "/v1/trips/cells/" + row.ToString() + "/BASE";
  auto put = raw_->Put(cell + "/5", R"({"fare": 12.5, "note": "'; DROP TABLE x; --"})",
                       "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(201, put->status) << put->body;
  json p = json::parse(put->body);
  EXPECT_EQ("trips/" + row.ToString() + "/BASE/5", p["address"]);
  EXPECT_EQ(true, p["created"]);
  auto retry = raw_->Put(cell + "/5", R"({"note": "'; DROP TABLE x; --", "fare": 12.5})",
                         "application/json");
  ASSERT_TRUE(retry);
  EXPECT_EQ(200, retry->status) << retry->body;
  auto conflict = raw_->Put(cell + "/5", R"({"fare": 13})", "application/json");
  ASSERT_TRUE(conflict);
  EXPECT_EQ(409, conflict->status);
  json c = json::parse(conflict->body);
  EXPECT_EQ("Conflict", c["error"]["code"]);
  EXPECT_EQ("trips/" + row.ToString() + "/BASE/5", c["error"]["address"]);

  auto get = raw_->Get(cell + "/5");
  ASSERT_TRUE(get);
  EXPECT_EQ(200, get->status);
  EXPECT_EQ("'; DROP TABLE x; --", json::parse(get->body)["body"]["note"]);  // stored verbatim
  EXPECT_EQ("application/json", get->get_header_value("Content-Type"));
  auto latest = raw_->Get(cell);
  ASSERT_TRUE(latest);
  EXPECT_EQ(200, latest->status);
  EXPECT_EQ(5, json::parse(latest->body)["ref_key"]);
  auto whole_row = raw_->Get("/v1/trips/cells/" + row.ToString());
  ASSERT_TRUE(whole_row);
  EXPECT_EQ(200, whole_row->status);
  EXPECT_EQ(1u, json::parse(whole_row->body)["cells"].size());
  auto versions = raw_->Get(cell + "/versions?limit=10&min_ref=0&as_of=2999-01-01T00:00:00Z");
  ASSERT_TRUE(versions);
  EXPECT_EQ(200, versions->status) << versions->body;
  EXPECT_EQ(1u, json::parse(versions->body)["cells"].size());
  const std::string batch = json{{"cells",
                                  {{{"row_key", row.ToString()},
                                    {"column", "STATUS"},
                                    {"ref_key", 1},
                                    {"body", {{"s", "done"}}}}}}}
                                .dump();
  auto posted = raw_->Post("/v1/trips/cells:batch", batch, "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(200, posted->status) << posted->body;
  EXPECT_EQ(201, json::parse(posted->body)["results"][0]["status"]);
  auto erased = raw_->Delete(cell);
  ASSERT_TRUE(erased);
  EXPECT_EQ(200, erased->status) << erased->body;
  EXPECT_EQ(6, json::parse(erased->body)["ref_key"]);
  auto gone = raw_->Get(cell);
  ASSERT_TRUE(gone);
  EXPECT_EQ(404, gone->status);
  EXPECT_EQ("NotFound", json::parse(gone->body)["error"]["code"]);
  const std::string shard = std::to_string(ShardForRow(row, kShards));
  auto log = raw_->Get("/v1/trips/shards/" + shard + "/log?after=0&limit=1000");
  ASSERT_TRUE(log);
  EXPECT_EQ(200, log->status) << log->body;
  json l = json::parse(log->body);
  EXPECT_GE(l["cells"].size(), 3u);
  EXPECT_EQ(l["cells"].back()["added_id"], l["next_after"]);
  auto index = raw_->Get("/v1/trips/indexes/by_city?shard_value=SF");
  ASSERT_TRUE(index);
  EXPECT_EQ(404, index->status);  // no such index (driver_partner_index: IndexQuery* tests)
  EXPECT_THAT(index->body, HasSubstr("has no index 'by_city'"));

  auto health = raw_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(200, health->status);
  auto ready = raw_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(200, ready->status) << ready->body;
  auto metrics = raw_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(200, metrics->status);
  EXPECT_THAT(metrics->body,
              HasSubstr("cellar_http_requests_total{route=\"put_cell\",code=\"201\"}"));
  EXPECT_THAT(metrics->body, HasSubstr("cellar_http_request_seconds_bucket"));
  EXPECT_THAT(metrics->body, HasSubstr("cellar_http_batch_cells_count "));
}

// Trips of two drivers in two cities; the index is filled by a backfill from
// the shard logs (the index worker's path is covered by indexes_test).
struct IndexedTrips {
  Uuid driver = Uuid::Random(), other_driver = Uuid::Random();
  Uuid city_a = Uuid::Random(), city_b = Uuid::Random();
  std::vector<Uuid> rows;  // the driver's trips: rows[0..2] in city_a, rows[3] in city_b
};

IndexedTrips WriteIndexedTrips(Client& client) {
  IndexedTrips t;
  auto trip = [&](const Uuid& driver, const Uuid& city, const std::string& when, double fare) {
    const Uuid row = Uuid::Random();
    json body = {{"driver_partner_uuid", driver.ToString()},
                 {"city_uuid", city.ToString()},
                 {"trip_created_at", when},
                 {"fare", {{"total", fare}, {"currency", "USD"}}},
                 {"status", "completed"}};
    auto put = client.Put("trips", {row, "BASE", 1, body});
    EXPECT_TRUE(put.ok()) << put.status().ToString();
    return row;
  };
  t.rows.push_back(trip(t.driver, t.city_a, "2026-01-01T10:00:00Z", 10));
  t.rows.push_back(trip(t.driver, t.city_a, "2026-02-01T10:00:00Z", 20));
  t.rows.push_back(trip(t.driver, t.city_a, "2026-03-01T10:00:00Z", 30));
  t.rows.push_back(trip(t.driver, t.city_b, "2026-04-01T10:00:00Z", 40));
  trip(t.other_driver, t.city_a, "2026-01-15T10:00:00Z", 50);
  Status s = BackfillIndex(env->store.get(), env->index_def, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return t;
}

TEST_F(HttpServerTest, IndexQueryThroughClient) {
  const IndexedTrips t = WriteIndexedTrips(*client_);
  IndexQueryRequest q;
  q.shard_value = t.driver.ToString();
  q.where = {"city_uuid = " + t.city_a.ToString(), "trip_created_at >= 2026-02-01T00:00:00Z"};
  q.order_by = "trip_created_at";
  q.descending = false;
  auto page = client_->QueryIndex("trips", "driver_partner_index", q);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(2u, page->hits.size());
  EXPECT_EQ(t.rows[1], page->hits[0].row_key);
  EXPECT_EQ(t.rows[2], page->hits[1].row_key);
  EXPECT_EQ("BASE", page->hits[0].column);
  EXPECT_EQ(1, page->hits[0].ref_key);
  EXPECT_EQ(20.0, page->hits[0].fields["fare.total"].get<double>());
  EXPECT_EQ(t.city_a.ToString(), page->hits[0].fields["city_uuid"]);
  EXPECT_TRUE(page->next_cursor.empty());
  EXPECT_GE(page->version, 1);
  // read=replica through the client and the HTTP API (this host has no
  // replica: the primary answers).
  IndexQueryRequest from_replica = q;
  from_replica.read = ReadPreference::kReplica;
  auto replica_page = client_->QueryIndex("trips", "driver_partner_index", from_replica);
  ASSERT_TRUE(replica_page.ok()) << replica_page.status().ToString();
  ASSERT_EQ(2u, replica_page->hits.size());
  EXPECT_EQ(t.rows[1], replica_page->hits[0].row_key);
  EXPECT_EQ(t.rows[2], replica_page->hits[1].row_key);

  // Paging by cursor visits each of the driver's trips once, newest first.
  IndexQueryRequest all;
  all.shard_value = t.driver.ToString();
  all.limit = 1;
  all.fields = {"trip_created_at"};
  std::vector<Uuid> seen;
  for (int pages = 0; pages < 10; ++pages) {
    auto p = client_->QueryIndex("trips", "driver_partner_index", all);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    for (const auto& h : p->hits) {
      seen.push_back(h.row_key);
      EXPECT_EQ(1u, h.fields.size()) << h.fields.dump();  // only the asked-for field
    }
    if (p->next_cursor.empty()) break;
    all.cursor = p->next_cursor;
  }
  EXPECT_EQ((std::vector<Uuid>{t.rows[3], t.rows[2], t.rows[1], t.rows[0]}), seen);

  // verify=true re-reads the cells: a trip moved to city_b drops out of a city_a query.
  auto moved = client_->Put("trips", {t.rows[0],
                                      "BASE",
                                      2,
                                      {{"driver_partner_uuid", t.driver.ToString()},
                                       {"city_uuid", t.city_b.ToString()},
                                       {"trip_created_at", "2026-01-01T10:00:00Z"},
                                       {"fare", {{"total", 10}}},
                                       {"status", "completed"}}});
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  IndexQueryRequest in_a;
  in_a.shard_value = t.driver.ToString();
  in_a.where = {"city_uuid = " + t.city_a.ToString()};
  in_a.verify = true;
  auto verified = client_->QueryIndex("trips", "driver_partner_index", in_a);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_EQ(2u, verified->hits.size());  // rows[1], rows[2]; rows[0]'s entry is stale
  EXPECT_EQ(1, verified->dropped_by_verify);

  auto unknown = client_->QueryIndex("trips", "no_such_index", in_a);
  EXPECT_EQ(StatusCode::kNotFound, unknown.status().code()) << unknown.status().ToString();
  IndexQueryRequest bad_field = in_a;
  bad_field.where = {"color = red"};
  auto bad = client_->QueryIndex("trips", "driver_partner_index", bad_field);
  EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code()) << bad.status().ToString();
}

TEST_F(HttpServerTest, IndexQueryThroughRawHttp) {
  const IndexedTrips t = WriteIndexedTrips(*client_);
  const std::string base =
      "/v1/trips/indexes/driver_partner_index?shard_value=" + t.driver.ToString();
  auto res = raw_->Get(base + "&where=city_uuid%20%3D%20" + t.city_b.ToString() +
                       "&field=fare.total&field=status");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  json doc = json::parse(res->body);
  EXPECT_EQ("driver_partner_index", doc["index"]);
  ASSERT_EQ(1u, doc["hits"].size()) << res->body;
  EXPECT_EQ(t.rows[3].ToString(), doc["hits"][0]["row_key"]);
  EXPECT_EQ((json{{"fare.total", 40.0}, {"status", "completed"}}), doc["hits"][0]["fields"]);
  EXPECT_FALSE(doc.contains("next_cursor"));

  auto in_list = raw_->Get(base + "&where=city_uuid%20in%20(" + t.city_a.ToString() + ",%20" +
                           t.city_b.ToString() + ")&where=fare.total%20%3C%2035");
  ASSERT_TRUE(in_list);
  ASSERT_EQ(200, in_list->status) << in_list->body;
  EXPECT_EQ(3u, json::parse(in_list->body)["hits"].size()) << in_list->body;

  struct Bad {
    std::string query;
    int status;
    std::string says;
  };
  const Bad bad[] = {
      {"", 400, "needs shard_value"},
      {"?shard_value=", 400, "needs shard_value"},
      {"?shard_value=not-a-uuid", 400, "shard_value"},
      {"?shard_value=" + t.driver.ToString() + "&where=color%20%3D%20red", 400, "color"},
      {"?shard_value=" + t.driver.ToString() + "&where=fare.total%20~%201", 400, "where"},
      {"?shard_value=" + t.driver.ToString() + "&where=fare.total%20%3E%20cheap", 400, "cheap"},
      {"?shard_value=" + t.driver.ToString() + "&limit=0", 400, "limit"},
      {"?shard_value=" + t.driver.ToString() + "&limit=1&limit=2", 400, "more than once"},
      {"?shard_value=" + t.driver.ToString() + "&order=sideways", 400, "order"},
      {"?shard_value=" + t.driver.ToString() + "&order_by=color", 400, "color"},
      {"?shard_value=" + t.driver.ToString() + "&verify=yes", 400, "verify"},
      {"?shard_value=" + t.driver.ToString() + "&cursor=zz", 400, "cursor"},
      {"?shard_value=" + t.driver.ToString() + "&read=nearest", 400,
       "'read' must be primary or replica, got 'nearest'"},
      {"?shard_value=" + t.driver.ToString() + "&read=replica&read=primary", 400, "more than once"},
      {"?shard_value=" + t.driver.ToString() + "&sql=1%3BDROP", 400, "unknown query parameter"},
  };
  for (const Bad& b : bad) {
    auto r = raw_->Get("/v1/trips/indexes/driver_partner_index" + b.query);
    ASSERT_TRUE(r) << b.query;
    EXPECT_EQ(b.status, r->status) << b.query << " -> " << r->body;
    EXPECT_THAT(r->body, HasSubstr(b.says)) << b.query;
  }
  auto other_ds =
      raw_->Get("/v1/users/indexes/driver_partner_index?shard_value=" + t.driver.ToString());
  ASSERT_TRUE(other_ds);
  EXPECT_EQ(404, other_ds->status) << other_ds->body;  // the index is over trips
  auto post = raw_->Post("/v1/trips/indexes/driver_partner_index", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(405, post->status);
}

// Read your index writes over HTTP: a put answers its position; a query
// given it as `after` waits for the index worker. No worker runs here, so
// the wait ends at limits.index_wait (5 s) with 503 and Retry-After; bad and
// foreign tokens are 400s naming them (the waiting itself: indexes_test).
TEST_F(HttpServerTest, IndexQueryAfterAPutsPosition) {
  const Uuid row = Uuid::Random(), driver = Uuid::Random();
  json body = {{"driver_partner_uuid", driver.ToString()},
               {"city_uuid", Uuid::Random().ToString()},
               {"trip_created_at", "2026-05-01T10:00:00Z"},
               {"fare", {{"total", 12.0}, {"currency", "USD"}}},
               {"status", "completed"}};
  auto put = client_->Put("trips", {row, "BASE", 1, body});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->position, EncodeLogPosition(env->config, "trips", put->shard, put->added_id));

  const std::string base =
      "/v1/trips/indexes/driver_partner_index?shard_value=" + driver.ToString() + "&after=";
  raw_->set_read_timeout(20, 0);  // httplib's default (5 s) is the server's wait
  // The node's count of waits that timed out, from its /metrics (-1: unreadable).
  auto timed_out_waits = [&]() -> int64_t {
    auto m = raw_->Get("/metrics");
    if (!m || m->status != 200) return -1;
    const std::string name = "cellar_index_position_waits_total{outcome=\"timed_out\"} ";
    const size_t at = m->body.find(name);
    return at == std::string::npos ? -1 : std::stoll(m->body.substr(at + name.size()));
  };
  const int64_t timed_out_before = timed_out_waits();
  ASSERT_GE(timed_out_before, 0) << "cellard's /metrics has no cellar_index_position_waits_total";
  const auto t0 = std::chrono::steady_clock::now();
  auto waited = raw_->Get(base + put->position);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(waited);
  EXPECT_EQ(503, waited->status) << waited->body;
  EXPECT_TRUE(waited->has_header("Retry-After"));
  EXPECT_THAT(waited->body, HasSubstr("not yet " + std::to_string(put->added_id)));
  EXPECT_GE(took, std::chrono::milliseconds(4900)) << "answered before limits.index_wait";
  EXPECT_EQ(timed_out_waits(), timed_out_before + 1);

  const std::string users_token = EncodeLogPosition(env->config, "users", put->shard, 1);
  for (const std::string& bad : {std::string("p1.0"), std::string("garbage"), users_token}) {
    auto r = raw_->Get(base + bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(400, r->status) << bad << " -> " << r->body;
    EXPECT_THAT(r->body, HasSubstr(bad));
  }
  auto empty = raw_->Get(base);
  ASSERT_TRUE(empty);
  EXPECT_EQ(400, empty->status) << empty->body;
  // The client passes `after` on.
  IndexQueryRequest q;
  q.shard_value = driver.ToString();
  q.after = "garbage";
  auto r = client_->QueryIndex("trips", "driver_partner_index", q);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("garbage"));
}

TEST_F(HttpServerTest, KeepAliveReusesOneConnection) {
  raw_->set_keep_alive(true);
  const Uuid row = Uuid::Random();
  int ports_seen = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = raw_->Put("/v1/trips/cells/" + row.ToString() + "/BASE/" + std::to_string(i),
                       "{\"i\":" + std::to_string(i) + "}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(201, r->status);
    ports_seen += r->get_header_value("Connection") == "close";
  }
  EXPECT_EQ(0, ports_seen) << "the server closed a keep-alive connection";
}

TEST_F(HttpServerTest, BearerTokensAndScopes) {
  ASSERT_NE(nullptr, env->auth_server);
  const Uuid row = Uuid::Random();
  auto writer = MakeClient(env->auth_server->url(), kRwToken);
  auto reader = MakeClient(env->auth_server->url(), kRoToken);
  auto nobody = MakeClient(env->auth_server->url());
  auto put = writer->Put("trips", {row, "BASE", 0, {{"a", 1}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(reader->Get("trips", row, "BASE", 0).ok());
  auto denied = reader->Put("trips", {row, "BASE", 1, {{"a", 1}}});
  EXPECT_EQ(StatusCode::kFailedPrecondition, denied.status().code());
  EXPECT_THAT(denied.status().message(), HasSubstr("may not write"));
  EXPECT_EQ(StatusCode::kFailedPrecondition, nobody->Latest("trips", row, "BASE").status().code());
  EXPECT_EQ(StatusCode::kFailedPrecondition,
            writer->Row("users", row).status().code());  // writer has trips only
  httplib::Client raw("127.0.0.1", env->auth_server->port());
  auto r = raw.Get("/v1/trips/cells/" + row.ToString());
  ASSERT_TRUE(r);
  EXPECT_EQ(401, r->status);
  EXPECT_THAT(r->get_header_value("WWW-Authenticate"), HasSubstr("Bearer"));
  auto health = raw.Get("/healthz");  // probes need no token
  ASSERT_TRUE(health);
  EXPECT_EQ(200, health->status);
}

TEST_F(HttpServerTest, Tls) {
  testing::TempDir dir("tls");
  const Status ca = testing::MakeTestCa(dir, "ca");
  ASSERT_TRUE(ca.ok()) << ca.ToString();
  const Status made = testing::MakeTestCertificate(dir, "server", "ca", "IP:127.0.0.1");
  ASSERT_TRUE(made.ok()) << made.ToString();
  const std::string cert = dir.File("server.pem"), key = dir.File("server-key.pem");
  auto tls =
      testing::CellardProcess::Start(env->config_path, {"--tls-cert", cert, "--tls-key", key});
  ASSERT_NE(nullptr, tls);
  ClientOptions o;
  o.endpoints = {tls->url()};
  o.ca_cert_file = dir.File("ca.pem");
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok());
  const Uuid row = Uuid::Random();
  auto put = (*client)->Put("trips", {row, "BASE", 0, {{"tls", true}}});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = (*client)->Latest("trips", row, "BASE");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(json({{"tls", true}}), got->body);
  httplib::Client plain("127.0.0.1", tls->port());  // plain HTTP is not served
  plain.set_connection_timeout(2);
  plain.set_read_timeout(2);
  auto r = plain.Get("/healthz");
  EXPECT_TRUE(!r || r->status != 200);
  EXPECT_EQ(0, tls->Stop());
}

TEST_F(HttpServerTest, GracefulStopOnSigterm) {
  auto extra = testing::CellardProcess::Start(env->config_path);
  ASSERT_NE(nullptr, extra);
  auto c = MakeClient(extra->url());
  ASSERT_TRUE(c->Put("trips", {Uuid::Random(), "BASE", 0, {{"a", 1}}}).ok());
  EXPECT_EQ(0, extra->Stop()) << "exit code after SIGTERM";
}

// An IPv6 literal in brackets, as base/host_port.h reads it: the brackets come
// off before the address is bound.
TEST_F(HttpServerTest, ListensOnABracketedIpv6Address) {
  auto v6 = testing::CellardProcess::Start(env->config_path, {}, "[::1]:0");
  ASSERT_NE(nullptr, v6) << "cellard did not listen on [::1]:0";
  httplib::Client c("::1", v6->port());
  c.set_connection_timeout(5, 0);
  auto res = c.Get("/healthz");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(0, v6->Stop());
}

// Last: stops the database. A shard host down is 503 with Retry-After; the
// client's retries give up with Unavailable; after a restart all is well.
TEST_F(HttpServerTest, ShardHostDownIs503WithRetryAfter) {
  env->db->Kill();
  auto ready = raw_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(503, ready->status);
  EXPECT_EQ("1", ready->get_header_value("Retry-After"));
  auto put = raw_->Put("/v1/trips/cells/" + Uuid::Random().ToString() + "/BASE/0", "{}",
                       "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(503, put->status) << put->body;
  EXPECT_EQ("Unavailable", json::parse(put->body)["error"]["code"]);
  EXPECT_EQ("1", put->get_header_value("Retry-After"));
  ClientOptions o;
  o.endpoints = {env->server->url()};
  o.max_attempts = 2;
  auto c = Client::Create(o);
  auto r = (*c)->Latest("trips", Uuid::Random(), "BASE");
  EXPECT_EQ(StatusCode::kUnavailable, r.status().code()) << r.status().ToString();
  EXPECT_GE((*c)->stats().unavailable_answers, 2u);
  auto metrics = raw_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("cellar_http_shard_errors_total{shard="));
  env->db->Restart();
  auto ok = client_->Put("trips", {Uuid::Random(), "BASE", 0, {{"back", true}}});
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace cellar
