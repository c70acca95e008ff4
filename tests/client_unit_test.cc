// PutCoalescer (client/internal/put_coalescer.h) without sockets: the
// requests it forms and the answer each caller gets, with the sending
// functions replaced by recorders whose first request can be held open.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>

#include "client/internal/put_coalescer.h"
#include "testing/wait_for.h"

namespace cellar::internal {
namespace {

using ::testing::ElementsAre;

// Records every request as it starts; the first `holds` requests then block
// until Release(i) (i counts from 0 in start order), so that later puts queue
// behind them. A put's result carries its ref_key as added_id, so each caller
// can check that the answer it got is its own.
class Recorder {
 public:
  explicit Recorder(int holds) {
    for (int i = 0; i < holds; ++i) {
      gates_.push_back(std::make_unique<std::promise<void>>());
      released_.push_back(gates_.back()->get_future().share());
    }
  }

  Result<PutResult> One(const CoalescedPut& p) {
    Start({p.cell->ref_key});
    if (p.cell->column == "bad") return NotFound("column bad is not in the config");
    return Answer(p);
  }

  MultiPutAnswer Many(const std::vector<const CoalescedPut*>& puts) {
    std::vector<int64_t> refs;
    MultiPutAnswer a;
    for (const CoalescedPut* p : puts) {
      refs.push_back(p->cell->ref_key);
      if (p->cell->column == "bad") a.rejected_whole = true;
      a.results.push_back(Answer(*p));
    }
    Start(refs);
    if (a.rejected_whole) a.results.clear();
    return a;
  }

  void Release(size_t i) { gates_.at(i)->set_value(); }
  size_t started() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_.size();
  }
  std::vector<std::vector<int64_t>> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  static Result<PutResult> Answer(const CoalescedPut& p) {
    PutResult r;
    r.added_id = static_cast<uint64_t>(p.cell->ref_key);
    r.ref_key = p.cell->ref_key;
    r.created = true;
    return r;
  }
  // Records the request, then holds it if it is one of the first `holds`.
  void Start(std::vector<int64_t> refs) {
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = requests_.size();
      requests_.push_back(std::move(refs));
    }
    if (n < released_.size()) released_[n].wait();
  }

  std::vector<std::unique_ptr<std::promise<void>>> gates_;
  std::vector<std::shared_future<void>> released_;
  std::mutex mu_;
  std::vector<std::vector<int64_t>> requests_;
};

struct Harness {
  explicit Harness(PutCoalescerOptions o, int holds = 1)
      : recorder(holds),
        coalescer(
            o, [this](const CoalescedPut& p) { return recorder.One(p); },
            [this](const std::vector<const CoalescedPut*>& p) { return recorder.Many(p); }) {}

  // Starts a caller putting (datastore, row r, column, ref_key) and returns
  // its answer's future.
  std::future<Result<PutResult>> Start(const std::string& datastore, int row, int64_t ref_key,
                                       const std::string& column = "BASE") {
    auto cell = std::make_shared<CellWrite>();
    cell->row_key = rows.at(static_cast<size_t>(row));
    cell->column = column;
    cell->ref_key = ref_key;
    return std::async(std::launch::async, [this, cell, datastore] {
      return coalescer.Put(CoalescedPut{datastore, cell.get(), "{\"k\":1}"});
    });
  }
  // Start(), then waits until the put is in the n-th request to start.
  std::future<Result<PutResult>> StartSent(size_t n, const std::string& datastore, int row,
                                           int64_t ref_key) {
    auto f = Start(datastore, row, ref_key);
    WaitStarted(n);
    return f;
  }
  // Start(), then waits until it is the n-th put waiting in the queue.
  std::future<Result<PutResult>> StartQueued(size_t n, const std::string& datastore, int row,
                                             int64_t ref_key, const std::string& column = "BASE") {
    auto f = Start(datastore, row, ref_key, column);
    WaitQueued(n);
    return f;
  }
  // Waits until n requests have started (the held ones stay open).
  void WaitStarted(size_t n) {
    ASSERT_TRUE(testing::WaitFor([&] { return recorder.started() == n; }, std::chrono::seconds(10),
                                 std::chrono::milliseconds(1)))
        << "started: " << recorder.started();
  }
  void WaitQueued(size_t n) {
    ASSERT_TRUE(testing::WaitFor([&] { return coalescer.queued() == n; }, std::chrono::seconds(10),
                                 std::chrono::milliseconds(1)))
        << "queued: " << coalescer.queued();
  }

  std::vector<Uuid> rows{Uuid::Random(), Uuid::Random(), Uuid::Random(),
                         Uuid::Random(), Uuid::Random(), Uuid::Random()};
  Recorder recorder;
  PutCoalescer coalescer;
};

PutCoalescerOptions OneInFlight(int max_puts = 32) {
  PutCoalescerOptions o;
  o.requests_in_flight = 1;
  o.max_puts_per_request = max_puts;
  return o;
}

// Expects each future to answer its own put (added_id == its ref_key).
void ExpectOwnAnswers(std::vector<std::future<Result<PutResult>>>& futures,
                      const std::vector<int64_t>& refs) {
  for (size_t i = 0; i < futures.size(); ++i) {
    Result<PutResult> r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->added_id, static_cast<uint64_t>(refs[i]));
  }
}

TEST(PutCoalescerTest, APutWithNothingRunningGoesAtOnceAlone) {
  Harness h(OneInFlight(), /*holds=*/0);
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.Start("trips", 0, 7));
  ExpectOwnAnswers(f, {7});
  f.clear();
  f.push_back(h.Start("trips", 1, 8));
  ExpectOwnAnswers(f, {8});
  EXPECT_EQ(h.recorder.requests(), (std::vector<std::vector<int64_t>>{{7}, {8}}));
  EXPECT_EQ(h.coalescer.stats().multi_put_requests, 0u);
}

TEST(PutCoalescerTest, PutsQueuedBehindARunningRequestGoTogetherEachWithItsOwnAnswer) {
  Harness h(OneInFlight());
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.StartSent(1, "trips", 0, 100));
  for (int i = 1; i <= 4; ++i)
    f.push_back(h.StartQueued(static_cast<size_t>(i), "trips", i, 100 + i));
  h.recorder.Release(0);
  ExpectOwnAnswers(f, {100, 101, 102, 103, 104});
  auto req = h.recorder.requests();
  ASSERT_EQ(req.size(), 2u);
  EXPECT_THAT(req[0], ElementsAre(100));
  EXPECT_THAT(req[1], ::testing::UnorderedElementsAre(101, 102, 103, 104));
  EXPECT_EQ(h.coalescer.stats().multi_put_requests, 1u);
  EXPECT_EQ(h.coalescer.stats().coalesced_puts, 4u);
}

TEST(PutCoalescerTest, ARowsPutsNeverShareARequest) {
  Harness h(OneInFlight());
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.StartSent(1, "trips", 0, 200));
  f.push_back(h.StartQueued(1, "trips", 1, 201));
  f.push_back(h.StartQueued(2, "trips", 1, 202));
  f.push_back(h.StartQueued(3, "trips", 2, 203));
  h.recorder.Release(0);
  ExpectOwnAnswers(f, {200, 201, 202, 203});
  auto req = h.recorder.requests();
  ASSERT_EQ(req.size(), 3u);
  EXPECT_THAT(req[1], ElementsAre(201, 203));
  EXPECT_THAT(req[2], ElementsAre(202));
}

TEST(PutCoalescerTest, RequestsHoldOneDatastoreAndAtMostMaxPuts) {
  Harness h(OneInFlight(/*max_puts=*/2));
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.StartSent(1, "trips", 0, 300));
  const std::vector<std::string> ds = {"trips", "users", "trips", "trips", "users"};
  for (size_t i = 0; i < ds.size(); ++i) {
    f.push_back(
        h.StartQueued(i + 1, ds[i], static_cast<int>(i + 1), 301 + static_cast<int64_t>(i)));
  }
  h.recorder.Release(0);
  ExpectOwnAnswers(f, {300, 301, 302, 303, 304, 305});
  auto req = h.recorder.requests();
  // FIFO by the oldest waiting put: trips 301+303, users 302+305, trips 304.
  ASSERT_EQ(req.size(), 4u);
  EXPECT_THAT(req[1], ElementsAre(301, 303));
  EXPECT_THAT(req[2], ElementsAre(302, 305));
  EXPECT_THAT(req[3], ElementsAre(304));
}

TEST(PutCoalescerTest, ARequestRefusedWholeIsResentOnePutAtATime) {
  Harness h(OneInFlight());
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.StartSent(1, "trips", 0, 400));
  f.push_back(h.StartQueued(1, "trips", 1, 401));
  auto bad = h.StartQueued(2, "trips", 2, 402, "bad");
  f.push_back(h.StartQueued(3, "trips", 3, 403));
  h.recorder.Release(0);
  ExpectOwnAnswers(f, {400, 401, 403});
  Result<PutResult> b = bad.get();
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  auto req = h.recorder.requests();
  ASSERT_EQ(req.size(), 5u);
  EXPECT_THAT(req[1], ElementsAre(401, 402, 403));
  EXPECT_THAT(req[2], ElementsAre(401));
  EXPECT_THAT(req[3], ElementsAre(402));
  EXPECT_THAT(req[4], ElementsAre(403));
  EXPECT_EQ(h.coalescer.stats().resent_alone, 1u);
}

PutCoalescerOptions TwoInFlight() {
  PutCoalescerOptions o;
  o.requests_in_flight = 2;
  return o;
}

TEST(PutCoalescerTest, AFewCallersUseTheFreeSlotsAtOnce) {
  Harness h(TwoInFlight(), /*holds=*/1);
  std::vector<std::future<Result<PutResult>>> held;
  held.push_back(h.StartSent(1, "trips", 0, 500));
  // One request runs and one caller waits: it takes the second slot at once
  // and is answered while the first request is still held.
  std::vector<std::future<Result<PutResult>>> second;
  second.push_back(h.Start("trips", 1, 501));
  ExpectOwnAnswers(second, {501});
  h.recorder.Release(0);
  ExpectOwnAnswers(held, {500});
}

TEST(PutCoalescerTest, UnderLoadASecondRequestWaitsForCallersPerSlotPuts) {
  Harness h(TwoInFlight(), /*holds=*/3);
  std::vector<std::future<Result<PutResult>>> f;
  f.push_back(h.StartSent(1, "trips", 0, 600));  // request 0, held
  f.push_back(h.StartSent(2, "trips", 1, 601));  // request 1 in the second slot, held
  for (int i = 2; i <= 6; ++i)                   // both slots busy: 5 puts queue
    f.push_back(h.StartQueued(static_cast<size_t>(i - 1), "trips", i % 6, 600 + i));
  h.recorder.Release(0);  // a slot frees: the 5 waiting puts go as request 2 (held)
  h.WaitStarted(3);
  h.recorder.Release(1);
  ASSERT_TRUE(f[0].valid() && f[1].valid());
  f[0].wait();
  f[1].wait();
  // One slot is free and request 2's 5 callers are in Put(). New puts wait
  // while queued x 2 slots < callers in Put(): 1x2 < 6 ... 4x2 < 9 ...
  std::vector<std::future<Result<PutResult>>> later;
  for (int i = 1; i <= 4; ++i) {
    later.push_back(h.StartQueued(static_cast<size_t>(i), "trips", i, 606 + i));
  }
  EXPECT_EQ(3u, h.recorder.started());
  // ... and the fifth starts the second request: 5 x 2 >= 10.
  later.push_back(h.StartSent(4, "trips", 5, 611));
  EXPECT_EQ(0u, h.coalescer.queued());
  auto req = h.recorder.requests();
  EXPECT_THAT(req[2], ElementsAre(602, 603, 604, 605, 606));
  EXPECT_THAT(req[3], ElementsAre(607, 608, 609, 610, 611));
  h.recorder.Release(2);
  ExpectOwnAnswers(f, {600, 601, 602, 603, 604, 605, 606});
  ExpectOwnAnswers(later, {607, 608, 609, 610, 611});
}

TEST(PutCoalescerTest, ManyCallersEachGetTheirOwnAnswer) {
  PutCoalescerOptions o;
  o.requests_in_flight = 2;
  o.max_puts_per_request = 8;
  Harness h(o, /*holds=*/0);
  h.rows.clear();
  for (int i = 0; i < 16; ++i) h.rows.push_back(Uuid::Random());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      CellWrite cell;
      cell.row_key = h.rows[static_cast<size_t>(t)];
      cell.column = "BASE";
      for (int i = 0; i < 200; ++i) {
        cell.ref_key = t * 1000 + i;
        auto r = h.coalescer.Put(CoalescedPut{"trips", &cell, "{}"});
        if (!r.ok() || r->added_id != static_cast<uint64_t>(cell.ref_key)) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  size_t puts = 0;
  for (const auto& r : h.recorder.requests()) {
    EXPECT_LE(r.size(), 8u);
    puts += r.size();
  }
  EXPECT_EQ(puts, 16u * 200u);
  EXPECT_EQ(h.coalescer.queued(), 0u);
}

}  // namespace
}  // namespace cellar::internal
