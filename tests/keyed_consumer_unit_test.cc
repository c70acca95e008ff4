// The keyed consumer's bookkeeping without Kafka: which offsets of an
// assignment may be committed, lag and the look-up of a stuck partition's
// record (AssignedPartitions), and the per-lane queues of batch mode
// (LaneQueues). The consumer with a broker is tested in keyed_consumer_test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "changelog/internal/assigned_partitions.h"
#include "changelog/internal/lane_queues.h"
#include "testing/wait_for.h"

namespace cellar {
namespace {

using namespace std::chrono_literals;

const TopicPartitionId kTp{"cellar.trips", 3};

AssignedPartitions::CommitCandidate OnlyCandidate(const AssignedPartitions& parts) {
  auto round = parts.StartCommitRound();
  EXPECT_EQ(1u, round.size());
  return round.empty() ? AssignedPartitions::CommitCandidate{} : round.front();
}

TEST(AssignedPartitionsTest, CommitsTheFinishedPrefixAndCountsLagFromIt) {
  AssignedPartitions parts;
  auto p = parts.Track(kTp, 10, 1000);
  EXPECT_EQ(p, parts.Track(kTp, 11, 1001));
  parts.Track(kTp, 12, 1002);
  parts.MarkDone(p, 11);  // out of order: nothing is committable yet
  auto c = OnlyCandidate(parts);
  EXPECT_EQ(-1, c.committable);
  EXPECT_FALSE(c.worth_committing());
  parts.MarkDone(p, 10);
  c = OnlyCandidate(parts);
  EXPECT_EQ(11, c.committable);
  EXPECT_TRUE(c.worth_committing());
  EXPECT_FALSE(parts.AfterCommit(c, /*committed=*/true, /*end=*/20).has_value());

  auto progress = parts.Progress();
  ASSERT_EQ(1u, progress.size());
  EXPECT_EQ(12, progress[0].committed);
  EXPECT_EQ(20, progress[0].end);
  EXPECT_EQ(8, progress[0].lag);  // 12..19
  EXPECT_EQ(1u, progress[0].open);
  EXPECT_EQ(1002, progress[0].oldest_timestamp_ms);  // offset 12, still open
  EXPECT_FALSE(OnlyCandidate(parts).worth_committing()) << "nothing new finished";
}

TEST(AssignedPartitionsTest, AFailedCommitIsNotRecordedAndAnOlderEndDoesNotLowerIt) {
  AssignedPartitions parts;
  auto p = parts.Track(kTp, 0, 0);
  parts.MarkDone(p, 0);
  auto c = OnlyCandidate(parts);
  (void)parts.AfterCommit(c, /*committed=*/false, /*end=*/5);
  EXPECT_EQ(-1, parts.Progress()[0].committed);
  EXPECT_TRUE(OnlyCandidate(parts).worth_committing()) << "the failed commit is tried again";
  (void)parts.AfterCommit(OnlyCandidate(parts), true, /*end=*/3);  // a stale known end
  EXPECT_EQ(5, parts.Progress()[0].end);
  EXPECT_EQ(4, parts.Progress()[0].lag);
}

TEST(AssignedPartitionsTest, ARevokedAssignmentNoLongerMovesThePartition) {
  AssignedPartitions parts;
  auto old_assignment = parts.Track(kTp, 5, 0);
  parts.Revoke({kTp});
  EXPECT_FALSE(parts.Current(old_assignment));
  EXPECT_TRUE(parts.Progress().empty());
  auto fresh = parts.Track(kTp, 5, 0);  // assigned again: the record is delivered again
  EXPECT_NE(old_assignment, fresh);
  EXPECT_TRUE(parts.Current(fresh));
  parts.MarkDone(old_assignment, 5);  // the old event finishes late
  EXPECT_EQ(-1, OnlyCandidate(parts).committable) << "a revoked event moved the new commit";
  parts.MarkDone(fresh, 5);
  EXPECT_EQ(5, OnlyCandidate(parts).committable);
}

// At a stop, an event is abandoned only when nothing after it in its
// partition started: otherwise the commit would stop before it and the later
// events, already handled, would be delivered again (seen once in CI as two
// events handled twice across a clean trigger stop).
TEST(AssignedPartitionsTest, AtAStopOnlyEventsPastEveryStartedOneAreAbandoned) {
  const auto kRunning = [] { return false; };
  const auto kStopping = [] { return true; };
  AssignedPartitions parts;
  auto p = parts.Track(kTp, 0, 0);
  for (int64_t offset = 1; offset <= 4; ++offset) parts.Track(kTp, offset, 0);
  EXPECT_TRUE(parts.TryStart(p, 0, kRunning));
  EXPECT_TRUE(parts.TryStart(p, 2, kRunning));  // another row's event, taken first
  parts.MarkDone(p, 0);
  parts.MarkDone(p, 2);
  EXPECT_TRUE(parts.TryStart(p, 1, kStopping)) << "2 started: 1 must run too";
  parts.MarkDone(p, 1);
  EXPECT_FALSE(parts.TryStart(p, 3, kStopping)) << "nothing after 3 started";
  EXPECT_FALSE(parts.TryStart(p, 4, kStopping));
  EXPECT_EQ(2, OnlyCandidate(parts).committable) << "every handled event is committed";
  parts.Revoke({kTp});
  EXPECT_FALSE(parts.TryStart(p, 3, kRunning)) << "revoked";
}

TEST(AssignedPartitionsTest, APartitionStuckWithNothingInHandHasItsNextRecordLookedUp) {
  AssignedPartitions parts;
  auto p = parts.Track(kTp, 0, 0);
  parts.MarkDone(p, 0);
  // Lagging (end 9) with nothing open, at the same position round after round.
  std::optional<RecordPosition> asked;
  int rounds = 0;
  while (!asked && rounds < 10) {
    asked = parts.AfterCommit(OnlyCandidate(parts), true, 9);
    ++rounds;
  }
  ASSERT_TRUE(asked.has_value()) << "never asked for a look-up";
  EXPECT_EQ(3, rounds);  // the first round sets the position, two more keep it
  EXPECT_EQ(kTp.topic, asked->topic);
  EXPECT_EQ(kTp.partition, asked->partition);
  EXPECT_EQ(1, asked->offset);
  EXPECT_EQ(0, parts.Progress()[0].oldest_timestamp_ms) << "not looked up yet";

  // A failed look-up is asked again, but not every round.
  parts.RecordLookedUp({*asked}, nullptr);
  int until_retry = 0;
  std::optional<RecordPosition> again;
  while (!again && until_retry < 100) {
    again = parts.AfterCommit(OnlyCandidate(parts), true, 9);
    ++until_retry;
  }
  ASSERT_TRUE(again.has_value());
  EXPECT_GT(until_retry, 10);
  const std::vector<int64_t> ts{424242};
  parts.RecordLookedUp({*again}, &ts);
  EXPECT_EQ(424242, parts.Progress()[0].oldest_timestamp_ms);
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(parts.AfterCommit(OnlyCandidate(parts), true, 9).has_value())
        << "a found timestamp is looked up again";

  parts.Track(kTp, 1, 777);  // the group moves on: the open record's timestamp counts
  EXPECT_EQ(777, parts.Progress()[0].oldest_timestamp_ms);
}

QueuedEvent Event(int64_t offset) {
  QueuedEvent q;
  q.e.offset = offset;
  q.queued_at = std::chrono::steady_clock::now();
  return q;
}

std::vector<int64_t> Offsets(const std::vector<QueuedEvent>& batch) {
  std::vector<int64_t> out;
  for (const auto& q : batch) out.push_back(q.e.offset);
  return out;
}

TEST(LaneQueuesTest, TheFirstEventOfAnEmptyLaneSchedulesItsTakerAndCallsHoldMaxBatch) {
  LaneQueues lanes(2, 0ms);
  EXPECT_TRUE(lanes.Push("a", Event(1)));
  EXPECT_FALSE(lanes.Push("a", Event(2))) << "a lane with a taker was scheduled again";
  EXPECT_FALSE(lanes.Push("a", Event(3)));
  EXPECT_TRUE(lanes.Push("b", Event(4)));
  EXPECT_EQ(4u, lanes.events());
  auto never = [] { return false; };
  EXPECT_EQ((std::vector<int64_t>{1, 2}), Offsets(lanes.NextBatch("a", never)));
  EXPECT_EQ((std::vector<int64_t>{3}), Offsets(lanes.NextBatch("a", never)));
  EXPECT_TRUE(lanes.NextBatch("a", never).empty());
  EXPECT_EQ(4u, lanes.events()) << "taken events count until their call returns";
  lanes.Finished("a", 3);
  EXPECT_EQ(1u, lanes.events());
  EXPECT_TRUE(lanes.Push("a", Event(5))) << "an emptied lane needs a new taker";
}

TEST(LaneQueuesTest, ALingeringCallEndsWhenItsLaneFillsOrItIsWoken) {
  LaneQueues lanes(3, std::chrono::hours(1));
  std::atomic<bool> stop{false};
  auto stopping = [&] { return stop.load(); };
  ASSERT_TRUE(lanes.Push("a", Event(1)));
  std::vector<QueuedEvent> full;
  std::thread taker([&] { full = lanes.NextBatch("a", stopping); });
  (void)lanes.Push("a", Event(2));
  (void)lanes.Push("a", Event(3));  // the lane is full: the linger ends
  taker.join();
  EXPECT_EQ((std::vector<int64_t>{1, 2, 3}), Offsets(full));

  ASSERT_TRUE(lanes.Push("b", Event(4)));
  std::vector<QueuedEvent> woken;
  std::thread lingering([&] { woken = lanes.NextBatch("b", stopping); });
  stop = true;
  lanes.WakeAll();
  lingering.join();  // would wait an hour without the wake-up
  EXPECT_EQ((std::vector<int64_t>{4}), Offsets(woken));
}

TEST(LaneQueuesTest, ACallOfFewerThanMaxBatchWaitsForItsOldestEventsLinger) {
  LaneQueues lanes(10, 150ms);
  ASSERT_TRUE(lanes.Push("a", Event(1)));
  const auto start = std::chrono::steady_clock::now();
  auto batch = lanes.NextBatch("a", [] { return false; });
  EXPECT_GE(std::chrono::steady_clock::now() - start, 140ms);
  EXPECT_EQ((std::vector<int64_t>{1}), Offsets(batch));
}

// Lanes of one group (the index worker: one host's lanes) share a call: a
// taker takes the queued events of its group's idle lanes after its own, up
// to max_batch, and not those of another group.
TEST(LaneQueuesTest, ACallTakesTheQueuedEventsOfItsGroupsIdleLanes) {
  LaneQueues lanes(3, 0ms, /*share_below=*/3);
  auto never = [] { return false; };
  ASSERT_TRUE(lanes.Push("a", Event(1), "host0"));
  ASSERT_FALSE(lanes.Push("a", Event(2), "host0"));
  ASSERT_TRUE(lanes.Push("b", Event(3), "host0"));
  ASSERT_FALSE(lanes.Push("b", Event(4), "host0"));
  ASSERT_TRUE(lanes.Push("c", Event(5), "host1"));
  EXPECT_EQ((std::vector<int64_t>{1, 2, 3}), Offsets(lanes.NextBatch("a", never)));
  EXPECT_EQ((std::vector<int64_t>{5}), Offsets(lanes.NextBatch("c", never)))
      << "another group's lane was taken or took";
  lanes.Finished("c", 1);
  lanes.Finished("a", 3);
  // b's rest is its own again once a's call returned.
  EXPECT_EQ((std::vector<int64_t>{4}), Offsets(lanes.NextBatch("b", never)));
  lanes.Finished("b", 1);
  EXPECT_EQ(0u, lanes.events());
}

// A call takes its group's lanes only while it holds fewer than share_below
// events: at high rates each lane keeps its own call, so lanes overlap their
// commits. Without share_below lanes never share.
TEST(LaneQueuesTest, ACallStopsTakingItsGroupsLanesAtShareBelow) {
  auto never = [] { return false; };
  LaneQueues lanes(10, 0ms, /*share_below=*/3);
  ASSERT_TRUE(lanes.Push("a", Event(1), "host0"));
  ASSERT_TRUE(lanes.Push("b", Event(2), "host0"));
  ASSERT_FALSE(lanes.Push("b", Event(3), "host0"));
  ASSERT_TRUE(lanes.Push("c", Event(4), "host0"));
  EXPECT_EQ((std::vector<int64_t>{1, 2, 3}), Offsets(lanes.NextBatch("a", never)))
      << "a (1 event) takes b, then holds 3: c stays its own";
  EXPECT_EQ((std::vector<int64_t>{4}), Offsets(lanes.NextBatch("c", never)));
  lanes.Finished("a", 3);
  lanes.Finished("c", 1);
  ASSERT_TRUE(lanes.Push("a", Event(5), "host0"));
  ASSERT_FALSE(lanes.Push("a", Event(6), "host0"));
  ASSERT_FALSE(lanes.Push("a", Event(7), "host0"));
  ASSERT_TRUE(lanes.Push("b", Event(8), "host0"));
  EXPECT_EQ((std::vector<int64_t>{5, 6, 7}), Offsets(lanes.NextBatch("a", never)))
      << "a call of share_below events took another lane";
  EXPECT_EQ((std::vector<int64_t>{8}), Offsets(lanes.NextBatch("b", never)));
  lanes.Finished("a", 3);
  lanes.Finished("b", 1);

  LaneQueues unshared(10, 0ms);
  ASSERT_TRUE(unshared.Push("a", Event(1), "host0"));
  ASSERT_TRUE(unshared.Push("b", Event(2), "host0"));
  EXPECT_EQ((std::vector<int64_t>{1}), Offsets(unshared.NextBatch("a", never)));
  EXPECT_EQ((std::vector<int64_t>{2}), Offsets(unshared.NextBatch("b", never)));
  unshared.Finished("a", 1);
  unshared.Finished("b", 1);
  EXPECT_EQ(0u, unshared.events());
}

// A lane whose own call has not returned is not taken: its next events would
// run beside its earlier ones.
TEST(LaneQueuesTest, ALaneInItsOwnCallIsNotTakenByItsGroup) {
  LaneQueues lanes(10, 0ms, /*share_below=*/10);
  auto never = [] { return false; };
  ASSERT_TRUE(lanes.Push("a", Event(1), "host0"));
  EXPECT_EQ((std::vector<int64_t>{1}), Offsets(lanes.NextBatch("a", never)));
  ASSERT_TRUE(lanes.Push("a", Event(2), "host0"));  // a is in its call
  ASSERT_TRUE(lanes.Push("b", Event(3), "host0"));
  EXPECT_EQ((std::vector<int64_t>{3}), Offsets(lanes.NextBatch("b", never)));
  lanes.Finished("b", 1);
  lanes.Finished("a", 1);
  EXPECT_EQ((std::vector<int64_t>{2}), Offsets(lanes.NextBatch("a", never)));
}

// Events pushed to a lane while another call holds its earlier ones wait for
// that call to return: a lane's events are never in two calls at once.
TEST(LaneQueuesTest, ABorrowedLanesNewEventsWaitForTheBorrowingCall) {
  LaneQueues lanes(10, 0ms, /*share_below=*/10);
  auto never = [] { return false; };
  ASSERT_TRUE(lanes.Push("a", Event(1), "host0"));
  ASSERT_TRUE(lanes.Push("b", Event(2), "host0"));
  EXPECT_EQ((std::vector<int64_t>{1, 2}), Offsets(lanes.NextBatch("a", never)));
  // b's queue was emptied by a's call: its scheduled taker finds nothing.
  EXPECT_TRUE(lanes.NextBatch("b", never).empty());
  EXPECT_TRUE(lanes.Push("b", Event(3), "host0")) << "b's new event needs a taker";
  std::atomic<bool> taken{false};
  std::vector<QueuedEvent> later;
  std::thread taker([&] {
    later = lanes.NextBatch("b", never);
    taken = true;
  });
  // Nothing releases b for these 100 ms: its taker must still be waiting.
  EXPECT_FALSE(testing::WaitFor([&] { return taken.load(); }, 100ms))
      << "b's next event was taken while a's call held its earlier one";
  lanes.Finished("a", 2);
  taker.join();
  EXPECT_EQ((std::vector<int64_t>{3}), Offsets(later));
  lanes.Finished("b", 1);
  EXPECT_EQ(0u, lanes.events());
}

}  // namespace
}  // namespace cellar
