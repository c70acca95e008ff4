// AnswerGate and UnitsWaiter: one Open wakes every sleeper, opens of one
// answering pass are deferred and deduplicated, and no wake-up is lost.
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cells/internal/answer_gate.h"
#include "cells/internal/unit_completion.h"
#include "gtest/gtest.h"

namespace cellar::internal {
namespace {

// Polls `done` until it holds or 20 s pass (a lost wake-up fails, not hangs).
template <typename Pred>
bool Eventually(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(AnswerGateTest, OneOpenWakesEverySleeper) {
  AnswerGate gate;
  constexpr int kSleepers = 8;
  std::atomic<int> woken{0};
  const uint32_t seen = gate.Seen();
  std::vector<std::thread> threads;
  for (int i = 0; i < kSleepers; ++i)
    threads.emplace_back([&] {
      gate.WaitPast(seen);
      woken.fetch_add(1);
    });
  ASSERT_TRUE(Eventually([&] { return gate.Sleepers() == kSleepers; }));
  EXPECT_EQ(woken.load(), 0);
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return woken.load() == kSleepers; }));
  for (auto& t : threads) t.join();
  EXPECT_EQ(gate.Sleepers(), 0u);
}

TEST(AnswerGateTest, WaitPastReturnsAtOnceAfterAnOpenSinceSeen) {
  AnswerGate gate;
  const uint32_t seen = gate.Seen();
  gate.Open();
  gate.WaitPast(seen);  // would block forever if the open were missed
  EXPECT_NE(gate.Seen(), seen);
}

TEST(AnswerGateTest, OpensOfOnePassAreDeferredAndOncePerGate) {
  auto a = std::make_shared<AnswerGate>();
  auto b = std::make_shared<AnswerGate>();
  const uint32_t a0 = a->Seen(), b0 = b->Seen();
  {
    OpenAfterAnswers pass;
    OpenAfterAnswers::OpenSoon(a);
    OpenAfterAnswers::OpenSoon(b);
    OpenAfterAnswers::OpenSoon(a);
    EXPECT_EQ(a->Seen(), a0);
    EXPECT_EQ(b->Seen(), b0);
  }
  EXPECT_EQ(a->Seen(), a0 + 1);
  EXPECT_EQ(b->Seen(), b0 + 1);
  OpenAfterAnswers::OpenSoon(a);  // no pass on this thread: at once
  EXPECT_EQ(a->Seen(), a0 + 2);
}

// Callers sharing one gate, answered in passes of random size by another
// thread, as the group committer's answering thread does: every Wait returns.
TEST(UnitsWaiterTest, CallersSharingAGateAreAllAnsweredUnderStress) {
  constexpr int kCallers = 6;
  constexpr int kRounds = 3000;
  for (int round = 0; round < kRounds; ++round) {
    auto gate = std::make_shared<AnswerGate>();
    auto other = std::make_shared<AnswerGate>();
    std::vector<std::unique_ptr<UnitsWaiter>> waiters;
    std::vector<WriteUnit> units(kCallers + 1);
    for (int i = 0; i < kCallers; ++i) {
      // The last caller has two units; its second is offered another gate.
      waiters.push_back(std::make_unique<UnitsWaiter>(i == kCallers - 1 ? 2 : 1));
      waiters.back()->OfferGate(gate);
      units[static_cast<size_t>(i)].completion = waiters.back().get();
    }
    waiters.back()->OfferGate(other);
    units[kCallers].completion = waiters.back().get();
    std::vector<std::thread> callers;
    std::atomic<int> returned{0};
    for (auto& w : waiters)
      callers.emplace_back([&, w = w.get()] {
        w->Wait();
        returned.fetch_add(1);
      });
    std::thread answerer([&, seed = round] {
      std::mt19937 rng(static_cast<unsigned>(seed));
      size_t next = 0;
      while (next < units.size()) {
        OpenAfterAnswers pass;
        const size_t n = 1 + rng() % 3;
        for (size_t k = 0; k < n && next < units.size(); ++k, ++next)
          units[next].completion->UnitDone(&units[next]);
      }
    });
    answerer.join();
    ASSERT_TRUE(Eventually([&] { return returned.load() == kCallers; })) << "round " << round;
    for (auto& t : callers) t.join();
  }
}

}  // namespace
}  // namespace cellar::internal
