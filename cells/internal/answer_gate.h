// AnswerGate: one futex word that the blocked callers of a transaction sleep
// on together, so that the committer's answering thread wakes all of them with
// one system call. Woken one by one (a condition variable each), every woken
// caller preempted the answering thread before it could wake the next: ~16
// involuntary context switches per 16-cell transaction, and the callers came
// back to the queue one after another instead of on both cores at once.
//
// OpenAfterAnswers batches the opens of one answering pass: a gate shared by
// a whole transaction's callers is opened once, after all of them are told.
//
// Threading: all members are thread-safe. Linux only (futex).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace cellar::internal {

class AnswerGate {
 public:
  // The gate's state, read before checking the condition waited for:
  // WaitPast(Seen()) returns at once if Open() was called since.
  uint32_t Seen() const { return sequence_.load(std::memory_order_acquire); }
  // Blocks until Open() was called after `seen` was read (or spuriously).
  void WaitPast(uint32_t seen);
  // Wakes every thread in WaitPast (no system call when none sleeps).
  void Open();
  // Threads in WaitPast now (for tests).
  uint32_t Sleepers() const { return sleepers_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint32_t> sequence_{0};
  std::atomic<uint32_t> sleepers_{0};
};

// While one lives on a thread, OpenSoon() on that thread collects gates and
// its destructor opens each once; elsewhere OpenSoon() opens at once.
// REQUIRES: at most one per thread at a time.
class OpenAfterAnswers {
 public:
  OpenAfterAnswers();
  ~OpenAfterAnswers();
  OpenAfterAnswers(const OpenAfterAnswers&) = delete;
  OpenAfterAnswers& operator=(const OpenAfterAnswers&) = delete;

  // Opens `gate` now, or when this thread's OpenAfterAnswers ends.
  static void OpenSoon(std::shared_ptr<AnswerGate> gate);

 private:
  std::vector<std::shared_ptr<AnswerGate>> gates_;
};

}  // namespace cellar::internal
