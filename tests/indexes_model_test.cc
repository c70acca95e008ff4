// Index integration tests at volume (issue 5), against one private MariaDB,
// the local broker, an in-process relay and an in-process IndexWorker:
//  - a randomised model test: 5,000 random puts/erases over 300 rows, then
//    the drained index equals the latest cells for many random queries;
//  - backfill of 20,000 pre-existing cells, interrupted and resumed while the
//    worker runs and writes continue;
//  - a changed definition builds version 2 while version 1 serves, and
//    version 2 takes over.
// Set CELLAR_TEST_SEED to replay a model run.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"
#include "tests/indexes_test_util.h"

namespace cellar {

namespace idxtest {
namespace {

using std::chrono::seconds;

uint64_t Seed() {
  if (const char* s = std::getenv("CELLAR_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// A random query: filters on any subset of the fields, a random order and page size.
IndexQuery RandomQuery(std::mt19937_64& rng, const IndexDefinition& def,
                       const std::vector<Uuid>& drivers, const std::vector<Uuid>& cities) {
  static const char* kStatuses[] = {"completed", "canceled", "open", "disputed", "nope"};
  static const char* kOps[] = {"=", "!=", "<", "<=", ">", ">="};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  auto time = [&] {
    return FormatRfc3339(*ParseRfc3339("2026-01-01T00:00:00Z") +
                         static_cast<int64_t>(pick(62 * 24 * 60)) * 60'000'000);
  };
  IndexQuery q = ByDriver(drivers[pick(drivers.size())], 1 + pick(40));
  if (pick(2)) {
    if (pick(3) == 0) {
      q.filters.push_back(Filter(def, "city_uuid in (" + cities[pick(cities.size())].ToString() +
                                          ", " + cities[pick(cities.size())].ToString() + ")"));
    } else {
      q.filters.push_back(Filter(def, std::string("city_uuid ") + (pick(4) ? "=" : "!=") + " " +
                                          cities[pick(cities.size())].ToString()));
    }
  }
  if (pick(2)) q.filters.push_back(Filter(def, "trip_created_at >= " + time()));
  if (pick(2)) q.filters.push_back(Filter(def, "trip_created_at < " + time()));
  if (pick(3) == 0)
    q.filters.push_back(Filter(
        def, std::string("fare.total ") + kOps[pick(6)] + " " + std::to_string(5 + pick(40))));
  if (pick(3) == 0) {
    if (pick(2))
      q.filters.push_back(
          Filter(def, std::string("status ") + kOps[pick(2)] + " " + kStatuses[pick(5)]));
    else
      q.filters.push_back(Filter(
          def, std::string("status in (") + kStatuses[pick(5)] + ", " + kStatuses[pick(5)] + ")"));
  }
  static const char* kOrders[] = {"", "", "trip_created_at", "fare.total", "city_uuid", "status"};
  q.order_by = kOrders[pick(6)];
  q.descending = pick(2);
  if (pick(4) == 0) q.fields = {"status", "fare.total"};
  q.verify = pick(5) == 0;
  return q;
}

// 3. Randomised model test.
TEST(IndexesModelTest, RandomPutsAndErasesThenIndexEqualsLatestCells) {
  const uint64_t seed = Seed();
  std::printf("model seed: %llu (CELLAR_TEST_SEED=%llu to replay)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto c = MakeCluster("idx_model", /*hosts=*/2);  // entries move between hosts too
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  ApplyIndex(*c->store, def);
  c->StartRelay();
  c->StartWorker({def});

  std::mt19937_64 rng(seed);
  std::vector<Uuid> drivers, cities, rows;
  auto uuid = [&] {
    std::array<uint8_t, 16> b;
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return Uuid(b);
  };
  for (int i = 0; i < 12; ++i) drivers.push_back(uuid());
  for (int i = 0; i < 5; ++i) cities.push_back(uuid());
  for (int i = 0; i < 300; ++i) rows.push_back(uuid());

  // 8 writer threads, each owning the rows i % 8 == t, 625 operations each.
  constexpr int kThreads = 8, kOps = 5000;
  std::atomic<int> puts{0}, erases{0}, bad_bodies{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(seed * 31 + t);
      std::map<Uuid, int64_t> next_ref;
      for (int op = 0; op < kOps / kThreads; ++op) {
        const Uuid& row = rows[t + kThreads * (r() % (rows.size() / kThreads))];
        if (r() % 5 == 0) {
          auto e = c->store->Erase("trips", row, "BASE");
          if (!e.ok()) {
            ++failures;
            continue;
          }
          next_ref[row] = e->ref_key + 1;
          ++erases;
          continue;
        }
        nlohmann::json body = TripBody(RandomTrip(r, drivers, cities));
        if (r() % 20 == 0) {  // a body the index must skip
          body.erase(r() % 2 ? "city_uuid" : "status");
          ++bad_bodies;
        }
        CellWrite w;
        w.row_key = row;
        w.column = "BASE";
        w.ref_key = next_ref[row]++;
        w.body = body;
        if (!c->store->Put("trips", w).ok()) ++failures;
        ++puts;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures, 0);
  std::printf("%d puts (%d bad bodies), %d erases\n", puts.load(), bad_bodies.load(),
              erases.load());

  // Drained: every cell is in Kafka, the group has committed past all of it,
  // and check finds nothing missing, stale or extra.
  std::string problems;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def);
        return problems.empty();
      },
      seconds(90), std::chrono::milliseconds(200)))
      << "lag " << c->WorkerLag() << "; " << problems;

  const auto latest = LatestCells(*c->store, "trips");
  Model model(def, latest);
  std::printf("%zu rows, %zu entries expected\n", latest.size(), model.size());
  EXPECT_GT(model.size(), 100u);
  IndexReader reader(c->store.get(), {def});
  // Every driver's whole index, then many random queries.
  size_t total = 0;
  for (const Uuid& d : drivers) {
    auto got = QueryAll(reader, ByDriver(d));
    total += got.size();
    EXPECT_EQ(Diff(model.Answer(ByDriver(d)), got), "") << d.ToString();
  }
  EXPECT_EQ(total, model.size());
  std::mt19937_64 qrng(seed + 1);
  int nonempty = 0;
  for (int i = 0; i < 400; ++i) {
    IndexQuery q = RandomQuery(qrng, def, drivers, cities);
    auto want = model.Answer(q);
    nonempty += !want.empty();
    auto got = QueryAll(reader, q);
    std::string filters;
    for (const auto& f : q.filters) filters += f.field + " ";
    ASSERT_EQ(Diff(want, got), "")
        << "query " << i << " order '" << q.order_by << "' desc " << q.descending << " limit "
        << q.limit << " filters " << filters << "verify " << q.verify;
  }
  EXPECT_GT(nonempty, 100);
}

std::vector<CellWrite> TripWrites(std::mt19937_64& rng, const std::vector<Uuid>& rows,
                                  const std::vector<Uuid>& drivers, const std::vector<Uuid>& cities,
                                  int64_t ref_key) {
  std::vector<CellWrite> out;
  for (const Uuid& row : rows) {
    CellWrite w;
    w.row_key = row;
    w.column = "BASE";
    w.ref_key = ref_key;
    w.body = TripBody(RandomTrip(rng, drivers, cities));
    if (rng() % 50 == 0) w.body.erase("fare");  // skipped by the index
    out.push_back(std::move(w));
  }
  return out;
}

void PutAll(CellStore& store, const std::vector<CellWrite>& writes) {
  for (size_t i = 0; i < writes.size(); i += 1000) {
    std::vector<CellWrite> batch(writes.begin() + i,
                                 writes.begin() + std::min(writes.size(), i + 1000));
    for (const auto& r : store.PutBatch("trips", batch))
      ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
}

// Writes new rows and new versions of `rows` until stopped (the live traffic
// during a backfill).
class LiveWrites {
 public:
  LiveWrites(CellStore* store, std::vector<Uuid> rows, std::vector<Uuid> drivers,
             std::vector<Uuid> cities, int64_t first_ref)
      : thread_([=, this] {
          std::mt19937_64 rng(17);
          int64_t ref = first_ref;
          while (!stop_) {
            std::vector<Uuid> some;
            for (int i = 0; i < 4; ++i) some.push_back(rows[rng() % rows.size()]);
            std::sort(some.begin(), some.end());
            some.erase(std::unique(some.begin(), some.end()), some.end());
            some.push_back(Uuid::Random());
            auto writes = TripWrites(rng, some, drivers, cities, ref++);
            for (const auto& r : store->PutBatch("trips", writes)) ok_ = ok_ && r.ok();
            count_ += writes.size();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ~100 cells/s
          }
        }) {}
  ~LiveWrites() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool ok() const { return ok_; }
  size_t count() const { return count_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> ok_{true};
  std::atomic<size_t> count_{0};
  std::thread thread_;
};

IndexVersion Version(CellStore& store, const std::string& table, int version) {
  IndexCatalog catalog(&store);
  auto all = catalog.Versions(table);
  EXPECT_TRUE(all.ok());
  if (all.ok())
    for (const auto& v : *all)
      if (v.version == version) return v;
  ADD_FAILURE() << "no version " << version;
  return {};
}

// 4. Backfill of 20,000 pre-existing cells: killed halfway, resumed, complete,
// while the worker runs and writes go on.
TEST(IndexesModelTest, BackfillOf20000CellsInterruptedAndResumed) {
  auto c = MakeCluster("idx_backfill");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  // The worker runs from the start, with the index not applied yet.
  c->StartRelay();
  c->StartWorker({def});

  std::mt19937_64 rng(2026);
  const auto drivers = RandomUuids(20);
  const auto cities = RandomUuids(6);
  const auto rows = RandomUuids(15000);
  const auto t0 = std::chrono::steady_clock::now();
  PutAll(*c->store, TripWrites(rng, rows, drivers, cities, 1));
  PutAll(*c->store,
         TripWrites(rng, std::vector<Uuid>(rows.begin(), rows.begin() + 4000), drivers, cities, 2));
  for (int i = 4000; i < 5000; ++i) ASSERT_TRUE(c->store->Erase("trips", rows[i], "BASE").ok());
  std::printf("20,000 cells written in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  // Let the worker pass over these events while the index does not exist yet,
  // so that only the backfill can index them (otherwise how much is left for
  // the backfill depends on how far the worker lagged: flaky under load).
  ASSERT_TRUE(
      WaitFor([&] { return c->RelayCaughtUp() && c->WorkerLag() == 0; }, std::chrono::seconds(120)))
      << "worker lag " << c->WorkerLag();

  const IndexVersion v1 = ApplyIndex(*c->store, def);
  EXPECT_EQ(v1.version, 1);
  EXPECT_EQ(v1.state, IndexState::kBuilding);
  IndexReader reader(c->store.get(), {def});
  {
    auto r = reader.Query(ByDriver(drivers[0]));
    ASSERT_TRUE(r.ok()) << r.status().ToString();  // a building version answers (partially)
    EXPECT_EQ(r->version, 1);
  }

  // Live traffic from here on, during both backfill runs.
  LiveWrites live(c->store.get(), std::vector<Uuid>(rows.begin(), rows.begin() + 6000), drivers,
                  cities, 10);
  std::atomic<bool> stop{false};
  std::vector<BackfillProgress> first_run;
  Status aborted;
  std::thread backfill([&] {
    aborted = BackfillIndex(
        c->store.get(), def,
        [&](const BackfillProgress& p) {
          first_run.push_back(p);
          if (first_run.size() == 12) stop = true;  // killed after 12 of ~24 pages
        },
        &stop);
  });
  backfill.join();
  EXPECT_EQ(aborted.code(), StatusCode::kAborted) << aborted.ToString();
  ASSERT_GE(first_run.size(), 12u);
  const BackfillProgress half = first_run.back();
  EXPECT_GT(half.cells_done, 0u);
  EXPECT_LT(half.cells_done, half.cells_total);
  EXPECT_GE(half.cells_total, 20000u);
  EXPECT_EQ(Version(*c->store, def.table, 1).state, IndexState::kBuilding);
  {
    auto report = CheckIndex(c->store.get(), def, false);
    ASSERT_TRUE(report.ok());
    EXPECT_GT(report->missing, 1000u) << "interrupted halfway";
  }

  auto elapsed = [t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::printf("[%.1f s] first backfill run aborted after %zu pages\n", elapsed(), first_run.size());
  std::vector<BackfillProgress> second_run;
  Status resumed = BackfillIndex(c->store.get(), def,
                                 [&](const BackfillProgress& p) { second_run.push_back(p); });
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  ASSERT_FALSE(second_run.empty());
  EXPECT_GT(second_run.front().cells_done, half.cells_done) << "resumed, not restarted";
  EXPECT_GE(second_run.back().cells_done, 20000u);
  for (size_t i = 1; i < second_run.size(); ++i)
    EXPECT_GE(second_run[i].cells_done, second_run[i - 1].cells_done);
  EXPECT_EQ(Version(*c->store, def.table, 1).state, IndexState::kReady);
  live.Stop();
  ASSERT_TRUE(live.ok());
  std::printf("[%.1f s] resumed backfill complete; %zu live cells written meanwhile\n", elapsed(),
              live.count());
  std::string problems;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def);
        return problems.empty();
      },
      seconds(60), std::chrono::milliseconds(250)))
      << problems;
  std::printf("[%.1f s] version 1 drained and checked\n", elapsed());
  Model model(def, LatestCells(*c->store, "trips"));
  EXPECT_GT(model.size(), 13000u);
  for (const Uuid& d : drivers) {
    IndexQuery q = ByDriver(d);
    q.filters = {Filter(def, "city_uuid = " + cities[0].ToString()),
                 Filter(def, "trip_created_at >= 2026-01-20T00:00:00Z")};
    EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader, q)), "") << d.ToString();
  }
}

// 4b. A changed definition (one more field) becomes version 2, building,
// while version 1 keeps serving; after its backfill version 2 serves. A
// smaller datastore than above: the point is the switch-over, not volume.
TEST(IndexesModelTest, ChangedDefinitionBuildsVersion2WhileVersion1Serves) {
  auto c = MakeCluster("idx_newversion");
  ASSERT_TRUE(c);
  const IndexDefinition def = DriverPartnerDef(c->config);
  c->StartRelay();
  c->StartWorker({def});
  std::mt19937_64 rng(77);
  const auto drivers = RandomUuids(10);
  const auto cities = RandomUuids(4);
  const auto rows = RandomUuids(3000);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  PutAll(*c->store, TripWrites(rng, rows, drivers, cities, 1));
  const IndexVersion v1 = ApplyIndex(*c->store, def);
  EXPECT_EQ(v1.state, IndexState::kBuilding);
  ASSERT_TRUE(BackfillIndex(c->store.get(), def, nullptr).ok());
  EXPECT_EQ(Version(*c->store, def.table, 1).state, IndexState::kReady);
  std::string problems;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def);
        return problems.empty();
      },
      seconds(60), std::chrono::milliseconds(250)))
      << problems;
  std::printf("[%.1f s] version 1 built\n", elapsed());
  Model model(def, LatestCells(*c->store, "trips"));

  // A changed definition (one more field) is version 2, building; version 1
  // keeps serving. The worker still runs with the old YAML (it is restarted
  // with the new one once version 2 is ready); readers use the new YAML.
  IndexDefinition def2 = def;
  def2.column_defs[0].fields.push_back({"rider_uuid", IndexFieldType::kUuid, "f_rider_uuid"});
  const IndexVersion v2 = ApplyIndex(*c->store, def2);
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(v2.state, IndexState::kBuilding);
  IndexReader reader2(c->store.get(), {def2});
  IndexQuery q = ByDriver(drivers[1]);
  auto serving = reader2.Query(q);
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  EXPECT_EQ(serving->version, 1);
  EXPECT_EQ(Diff(model.Answer(q), QueryAll(reader2, q)), "") << "version 1 serves as before";
  // A write while version 2 builds reaches the serving version 1.
  Trip t = RandomTrip(rng, drivers, cities);
  t.driver = drivers[1];
  const Uuid fresh = Uuid::Random();
  PutTrip(*c->store, fresh, 1, TripBody(t));
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& h : QueryAll(reader2, q))
          if (h.row_key == fresh) return true;
        return false;
      },
      seconds(30)));

  LiveWrites live2(c->store.get(), std::vector<Uuid>(rows.begin(), rows.begin() + 2000), drivers,
                   cities, 1000);
  Status built = BackfillIndex(c->store.get(), def2, nullptr);
  ASSERT_TRUE(built.ok()) << built.ToString();
  live2.Stop();
  ASSERT_TRUE(live2.ok());
  std::printf("[%.1f s] version 2 built\n", elapsed());
  EXPECT_EQ(Version(*c->store, def.table, 1).state, IndexState::kRetired);
  EXPECT_EQ(Version(*c->store, def.table, 2).state, IndexState::kReady);
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def2);
        return problems.empty();
      },
      seconds(60), std::chrono::milliseconds(250)))
      << problems;
  std::printf("[%.1f s] version 2 drained and checked\n", elapsed());
  // The worker restarted with the new YAML keeps version 2 up to date.
  c->StopWorker();
  c->StartWorker({def2});
  std::vector<Uuid> more(rows.begin() + 100, rows.begin() + 400);
  PutAll(*c->store, TripWrites(rng, more, drivers, cities, 5000));
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!c->RelayCaughtUp() || c->WorkerLag() != 0) return false;
        problems = CheckProblems(*c->store, def2);
        return problems.empty();
      },
      seconds(60), std::chrono::milliseconds(250)))
      << problems;
  Model model2(def2, LatestCells(*c->store, "trips"));
  for (const Uuid& d : drivers) {
    IndexQuery q2 = ByDriver(d);
    q2.filters = {Filter(def2, "city_uuid = " + cities[1].ToString())};
    auto r = reader2.Query(q2);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->version, 2);
    EXPECT_EQ(Diff(model2.Answer(q2), QueryAll(reader2, q2)), "") << d.ToString();
  }
  // Queries may filter on the new field now.
  const auto latest = LatestCells(*c->store, "trips");
  const Cell& some = latest.at({fresh, "BASE"});
  IndexQuery by_rider = ByDriver(drivers[1]);
  by_rider.filters = {Filter(def2, "rider_uuid = " + some.body["rider_uuid"].get<std::string>())};
  auto hits = QueryAll(reader2, by_rider);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].row_key, fresh);
}

}  // namespace
}  // namespace idxtest
}  // namespace cellar
