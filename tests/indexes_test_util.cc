#include "tests/indexes_test_util.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "base/time.h"
#include "cells/shard_map.h"
#include "changelog/consumer_group_lag.h"
#include "gtest/gtest.h"
#include "indexes/index_entry.h"
#include "tests/support/test_cluster.h"

namespace cellar::idxtest {
namespace {

std::unique_ptr<testing::PrivateMariaDb> g_db;
std::unique_ptr<testing::LocalBroker> g_broker;

// Started on the main thread before the first test (PrivateMariaDb's
// PDEATHSIG is bound to the starting thread), stopped after the last.
class IndexEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_db = testing::PrivateMariaDb::Start("idxtest");
    // Nothing here simulates a crash: trade durability for speed.
    g_db->Execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
    g_broker = testing::LocalBroker::Start();
  }
  void TearDown() override {
    g_broker.reset();
    g_db.reset();
  }
};

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new IndexEnvironment);

// -1/0/1 on two field values of one type, as MySQL compares the stored columns.
int CompareJson(IndexFieldType t, const nlohmann::json& a, const nlohmann::json& b) {
  switch (t) {
    case IndexFieldType::kUuid:
    case IndexFieldType::kString: {  // lower-case canonical UUIDs sort like their bytes
      const auto& x = a.get_ref<const std::string&>();
      const auto& y = b.get_ref<const std::string&>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kDatetime: {
      int64_t x = *ParseRfc3339(a.get<std::string>()), y = *ParseRfc3339(b.get<std::string>());
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kFloat: {
      double x = a.get<double>(), y = b.get<double>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kInt: {
      int64_t x = a.get<int64_t>(), y = b.get<int64_t>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    case IndexFieldType::kBool: {
      int x = a.get<bool>(), y = b.get<bool>();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
  }
  return 0;
}

// A field value of the body in the form queries return, or nullopt when the
// body has no valid value (written from the documented rules).
std::optional<nlohmann::json> ModelValue(const IndexField& f, const nlohmann::json& body) {
  const nlohmann::json* cur = &body;
  std::stringstream path(f.path);
  std::string part;
  while (std::getline(path, part, '.')) {
    if (!cur->is_object() || !cur->contains(part)) return std::nullopt;
    cur = &(*cur)[part];
  }
  const nlohmann::json& v = *cur;
  switch (f.type) {
    case IndexFieldType::kUuid: {
      if (!v.is_string()) return std::nullopt;
      auto u = Uuid::Parse(v.get<std::string>());
      if (!u.ok()) return std::nullopt;
      return u->ToString();
    }
    case IndexFieldType::kString:
      if (!v.is_string() || v.get<std::string>().size() > 255) return std::nullopt;
      return v;
    case IndexFieldType::kInt:
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) return std::nullopt;
      if (!v.is_number_integer()) return std::nullopt;
      return v.get<int64_t>();
    case IndexFieldType::kFloat:
      if (!v.is_number()) return std::nullopt;
      return v.get<double>();
    case IndexFieldType::kBool:
      if (!v.is_boolean()) return std::nullopt;
      return v;
    case IndexFieldType::kDatetime: {
      if (!v.is_string()) return std::nullopt;
      auto t = ParseRfc3339(v.get<std::string>());
      if (!t.ok()) return std::nullopt;
      return FormatRfc3339(*t);
    }
  }
  return std::nullopt;
}

// A filter value (SqlParam) as the JSON form of its field.
nlohmann::json ParamJson(const IndexField& f, const SqlParam& p) {
  switch (f.type) {
    case IndexFieldType::kUuid:
      return Uuid::FromBytes(std::get<std::string>(p)).ToString();
    case IndexFieldType::kString:
      return std::get<std::string>(p);
    case IndexFieldType::kDatetime:
      return FormatRfc3339(std::get<int64_t>(p));
    case IndexFieldType::kFloat:
      return std::get<double>(p);
    case IndexFieldType::kInt:
      return std::get<int64_t>(p);
    case IndexFieldType::kBool:
      return std::get<int64_t>(p) != 0;
  }
  return nullptr;
}

bool Holds(const IndexField& f, const IndexFilter& filter, const nlohmann::json& v) {
  if (v.is_null()) return false;  // SQL: NULL matches no comparison
  if (filter.op == IndexFilter::Op::kIn) {
    for (const auto& x : filter.values)
      if (CompareJson(f.type, v, ParamJson(f, x)) == 0) return true;
    return false;
  }
  int c = CompareJson(f.type, v, ParamJson(f, filter.values.at(0)));
  switch (filter.op) {
    case IndexFilter::Op::kEq:
      return c == 0;
    case IndexFilter::Op::kNe:
      return c != 0;
    case IndexFilter::Op::kLt:
      return c < 0;
    case IndexFilter::Op::kLe:
      return c <= 0;
    case IndexFilter::Op::kGt:
      return c > 0;
    case IndexFilter::Op::kGe:
      return c >= 0;
    default:
      return false;
  }
}

}  // namespace

testing::PrivateMariaDb& Db() { return *g_db; }
testing::LocalBroker& Broker() { return *g_broker; }

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds step) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(step);
  }
}

Cluster::~Cluster() {
  StopWorker();
  if (relay) relay->Stop();
  relay.reset();
  if (store) store->Close();
}

void Cluster::StartRelay() {
  relay = std::make_unique<Relay>(store.get(), "idxtest-relay");
  Status s = relay->Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void Cluster::StartWorker(const std::vector<IndexDefinition>& defs) {
  IndexWorkerOptions options;
  options.concurrency = 8;
  worker = std::make_unique<IndexWorker>(store.get(), defs, options);
  Status s = worker->Start();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

void Cluster::StopWorker() {
  if (worker) worker->Stop();
  worker.reset();
}

int64_t Cluster::WorkerLag() const {
  auto lag = ReadGroupLag(
      config, config.kafka.topic_prefix + ".indexer",
      {config.kafka.topic_prefix + ".trips.cells", config.kafka.topic_prefix + ".users.cells"});
  return lag.ok() ? lag->total : -1;
}

bool Cluster::RelayCaughtUp() const {
  for (const auto& s : ReadRelayStatus(*store))
    if (!s.error.empty() || s.lag != 0) return false;
  return true;
}

std::unique_ptr<Cluster> MakeCluster(const std::string& prefix, int hosts) {
  auto c = std::make_unique<Cluster>();
  static std::map<std::string, int> runs;  // --gtest_repeat: fresh databases and topics
  const int run = ++runs[prefix];
  c->prefix = run == 1 ? prefix : prefix + "_r" + std::to_string(run);
  // The same server once per host: distinct names (db1, db2, ...), so
  // distinct host databases.
  const std::vector<const testing::PrivateMariaDb*> dbs(hosts, &Db());
  std::string yaml = testing::MakeClusterYaml(dbs, kShards, Broker().bootstrap(), c->prefix);
  const auto kafka = yaml.find("kafka:\n");
  const auto line_end = yaml.find('\n', yaml.find("brokers:", kafka));
  yaml.insert(line_end + 1, "  topic_prefix: " + c->prefix +
                                "\n  partitions: " + std::to_string(kPartitions) + "\n");
  yaml += "relay:\n  lock_retry_ms: 200\n  poll_max_ms: 10\n";
  auto cfg = ParseClusterConfig(yaml, "<indexes_test>");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString() << "\n" << yaml;
  if (!cfg.ok()) return nullptr;
  c->config = std::move(cfg).value();
  for (const char* ds : {"trips", "users"}) {
    Status s = Broker().CreateTopic(c->prefix + "." + ds + ".cells", kPartitions);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  c->store = CellStore::Open(c->config);
  Status s = c->store->Init();
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  return c;
}

IndexDefinition DriverPartnerDef(const ClusterConfig& config) {
  auto defs = LoadIndexDefinitions(
      std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes/driver_partner_index.yaml",
      config);
  EXPECT_TRUE(defs.ok()) << defs.status().ToString();
  return defs.ok() && !defs->empty() ? defs->front() : IndexDefinition{};
}

IndexDefinition ParseDef(const std::string& yaml, const ClusterConfig& config) {
  auto defs = ParseIndexDefinitions(yaml, "<test>", config);
  EXPECT_TRUE(defs.ok()) << defs.status().ToString();
  return defs.ok() && !defs->empty() ? defs->front() : IndexDefinition{};
}

IndexVersion ApplyIndex(CellStore& store, const IndexDefinition& def) {
  IndexCatalog catalog(&store);
  auto r = catalog.Apply(def);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->version : IndexVersion{};
}

nlohmann::json TripBody(const Trip& t) {
  return {{"driver_partner_uuid", t.driver.ToString()},
          {"city_uuid", t.city.ToString()},
          {"trip_created_at", FormatRfc3339(t.when)},
          {"fare", {{"total", t.fare}, {"currency", "EUR"}}},
          {"status", t.status},
          {"rider_uuid", t.rider.ToString()},
          {"notes", "not indexed"}};
}

Trip RandomTrip(std::mt19937_64& rng, const std::vector<Uuid>& drivers,
                const std::vector<Uuid>& cities) {
  static const char* kStatuses[] = {"completed", "canceled", "open", "disputed"};
  static const double kFares[] = {7.5, 10, 12.25, 15, 19.99, 23.5, 40};
  Trip t;
  t.driver = drivers[rng() % drivers.size()];
  t.city = cities[rng() % cities.size()];
  // Whole seconds over 60 days of 2026 (and sometimes equal times).
  t.when = *ParseRfc3339("2026-01-01T00:00:00Z") +
           static_cast<int64_t>(rng() % (60 * 24 * 60)) * 60'000'000;
  t.fare = kFares[rng() % 7];
  t.status = kStatuses[rng() % 4];
  std::array<uint8_t, 16> b;
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  t.rider = Uuid(b);
  return t;
}

std::vector<Uuid> RandomUuids(int n) {
  std::vector<Uuid> out;
  for (int i = 0; i < n; ++i) out.push_back(Uuid::Random());
  return out;
}

Uuid UuidOnOtherShard(const Uuid& other) {
  while (true) {
    Uuid u = Uuid::Random();
    if (ShardForRow(u, kShards) != ShardForRow(other, kShards)) return u;
  }
}

Uuid UuidOnSameShard(const Uuid& other) {
  while (true) {
    Uuid u = Uuid::Random();
    if (u != other && ShardForRow(u, kShards) == ShardForRow(other, kShards)) return u;
  }
}

int64_t PutTrip(CellStore& store, const Uuid& row, int64_t ref_key, const nlohmann::json& body) {
  CellWrite w;
  w.row_key = row;
  w.column = "BASE";
  w.ref_key = ref_key;
  w.body = body;
  auto r = store.Put("trips", w);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return ref_key;
}

std::map<std::pair<Uuid, std::string>, Cell> LatestCells(CellStore& store,
                                                         const std::string& datastore) {
  std::map<std::pair<Uuid, std::string>, Cell> out;
  for (uint32_t s = 0; s < store.config().shards; ++s) {
    uint64_t after = 0;
    while (true) {
      auto page = store.ShardLog(datastore, s, after, 5000);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      if (page->cells.empty()) {
        // Empty is also the answer while a writer of the host stays open past
        // the read's wait: the end only when nothing committed lies beyond.
        auto head = store.ShardHead(datastore, s);
        EXPECT_TRUE(head.ok()) << head.status().ToString();
        if (!head.ok() || *head <= after) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      for (Cell& c : page->cells) {
        auto it = out.find({c.row_key, c.column});
        if (it == out.end())
          out.emplace(std::make_pair(c.row_key, c.column), std::move(c));
        else if (c.ref_key > it->second.ref_key)
          it->second = std::move(c);
      }
      after = page->next_after;
    }
  }
  return out;
}

std::string Describe(const std::vector<ModelHit>& hits, size_t max) {
  std::string out = std::to_string(hits.size()) + " hits";
  for (size_t i = 0; i < hits.size() && i < max; ++i)
    out += "\n    " + hits[i].row_key.ToString() + "/" + hits[i].column + "/" +
           std::to_string(hits[i].ref_key) + " " + hits[i].fields.dump();
  return out;
}

Model::Model(const IndexDefinition& def, const std::map<std::pair<Uuid, std::string>, Cell>& latest)
    : def_(def) {
  for (const auto& [key, cell] : latest) {
    const IndexColumnDef* cd = def.FindColumnDef(key.second);
    if (!cd || cell.tombstone) continue;
    Entry e;
    e.hit.row_key = key.first;
    e.hit.column = key.second;
    e.hit.ref_key = cell.ref_key;
    e.created_at = cell.created_at;
    e.hit.fields = nlohmann::json::object();
    bool ok = true;
    for (const auto& f : def.AllFields()) {
      bool in_cd = false;
      for (const auto& x : cd->fields) in_cd |= x.path == f.path;
      if (!in_cd) {
        e.hit.fields[f.path] = nullptr;
        continue;
      }
      auto v = ModelValue(f, cell.body);
      if (!v) ok = false;
      e.hit.fields[f.path] = v ? *v : nlohmann::json();
    }
    if (ok) entries_.push_back(std::move(e));
  }
}

std::vector<ModelHit> Model::Answer(const IndexQuery& q) const {
  const auto all = def_.AllFields();
  const IndexField& shard = all.front();
  auto shard_value = TextToFieldValue(shard, q.shard_value);
  EXPECT_TRUE(shard_value.ok());
  const nlohmann::json want_shard = ParamJson(shard, *shard_value);
  const IndexField* order = q.order_by.empty() ? nullptr : def_.FindField(q.order_by);
  std::vector<const Entry*> hits;
  for (const auto& e : entries_) {
    const auto& sv = e.hit.fields[shard.path];
    if (sv.is_null() || CompareJson(shard.type, sv, want_shard) != 0) continue;
    bool ok = true;
    for (const auto& f : q.filters)
      ok = ok && Holds(*def_.FindField(f.field), f, e.hit.fields[f.field]);
    if (order && e.hit.fields[order->path].is_null()) ok = false;
    if (ok) hits.push_back(&e);
  }
  auto less = [&](const Entry* a, const Entry* b) {
    int c = order ? CompareJson(order->type, a->hit.fields[order->path], b->hit.fields[order->path])
                  : (a->created_at < b->created_at ? -1 : a->created_at > b->created_at);
    if (c != 0) return c < 0;
    if (a->hit.row_key != b->hit.row_key) return a->hit.row_key < b->hit.row_key;
    return a->hit.column < b->hit.column;
  };
  std::sort(hits.begin(), hits.end(), less);
  if (q.descending) std::reverse(hits.begin(), hits.end());
  std::vector<ModelHit> out;
  for (const Entry* e : hits) {
    ModelHit h = e->hit;
    if (!q.fields.empty()) {
      nlohmann::json only = nlohmann::json::object();
      for (const auto& name : q.fields) only[name] = h.fields[name];
      h.fields = only;
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<ModelHit> ToHits(const IndexQueryResult& r) {
  std::vector<ModelHit> out;
  for (const auto& h : r.hits)
    out.push_back(ModelHit{h.row_key, h.column_key, h.ref_key, h.fields});
  return out;
}

std::vector<ModelHit> QueryAll(IndexReader& reader, IndexQuery q, int* pages) {
  std::vector<ModelHit> out;
  std::set<std::pair<Uuid, std::string>> seen;
  int n = 0;
  q.cursor.clear();
  while (true) {
    auto r = reader.Query(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    ++n;
    EXPECT_LE(static_cast<int>(r->hits.size()), q.limit);
    for (auto& h : ToHits(*r)) {
      EXPECT_TRUE(seen.insert({h.row_key, h.column}).second)
          << "hit " << h.row_key.ToString() << " returned twice (page " << n << ")";
      out.push_back(std::move(h));
    }
    if (r->next_cursor.empty()) break;
    EXPECT_FALSE(r->hits.empty()) << "a cursor after an empty page";
    if (n > 100000 || r->hits.empty()) break;
    q.cursor = r->next_cursor;
  }
  if (pages) *pages = n;
  return out;
}

std::string Diff(const std::vector<ModelHit>& want, const std::vector<ModelHit>& got) {
  if (want == got) return "";
  std::ostringstream os;
  os << "want " << want.size() << " hits, got " << got.size();
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  os << "; first difference at " << i << ":";
  auto one = [](const ModelHit& h) {
    return h.row_key.ToString() + "/" + h.column + "/" + std::to_string(h.ref_key) + " " +
           h.fields.dump();
  };
  for (size_t k = i; k < i + 3; ++k) {
    if (k < want.size()) os << "\n    want[" << k << "] " << one(want[k]);
    if (k < got.size()) os << "\n    got[" << k << "]  " << one(got[k]);
  }
  // Which hits are missing or unexpected, regardless of order.
  std::set<std::pair<Uuid, std::string>> w, g;
  for (const auto& h : want) w.insert({h.row_key, h.column});
  for (const auto& h : got) g.insert({h.row_key, h.column});
  int shown = 0;
  for (const auto& k : w)
    if (!g.count(k) && shown++ < 3) os << "\n    missing " << k.first.ToString();
  for (const auto& k : g)
    if (!w.count(k) && shown++ < 6) os << "\n    unexpected " << k.first.ToString();
  return os.str();
}

std::string WaitForConverge(CellStore& store, IndexReader& reader, const IndexDefinition& def,
                            const IndexQuery& q, std::chrono::milliseconds timeout) {
  std::string diff;
  WaitFor(
      [&] {
        Model model(def, LatestCells(store, def.datastore));
        diff = Diff(model.Answer(q), QueryAll(reader, q));
        return diff.empty();
      },
      timeout, std::chrono::milliseconds(100));
  return diff;
}

IndexFilter Filter(const IndexDefinition& def, const std::string& text) {
  auto f = ParseIndexFilter(def, text);
  EXPECT_TRUE(f.ok()) << text << ": " << f.status().ToString();
  return f.ok() ? *f : IndexFilter{};
}

std::string CheckProblems(CellStore& store, const IndexDefinition& def) {
  auto r = CheckIndex(&store, def, false);
  if (!r.ok()) return r.status().ToString();
  if (r->missing == 0 && r->stale == 0 && r->extra == 0 && r->expected == r->present) return "";
  std::ostringstream os;
  os << "v" << r->version << " expected " << r->expected << " present " << r->present << " missing "
     << r->missing << " stale " << r->stale << " extra " << r->extra;
  for (const auto& e : r->examples) os << "\n  " << e;
  return os.str();
}

std::string RowHex(const Uuid& row) {
  std::string s = row.ToString();
  s.erase(std::remove(s.begin(), s.end(), '-'), s.end());
  return s;
}

}  // namespace cellar::idxtest
