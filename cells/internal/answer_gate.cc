#include "cells/internal/answer_gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace cellar::internal {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
              std::atomic<uint32_t>::is_always_lock_free);

uint32_t* Word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

thread_local OpenAfterAnswers* active_batch = nullptr;

}  // namespace

void AnswerGate::WaitPast(uint32_t seen) {
  // Dekker with Open(): either it sees this sleeper, or this sees its new
  // sequence before sleeping (both sides sequentially consistent).
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  while (sequence_.load(std::memory_order_seq_cst) == seen)
    syscall(SYS_futex, Word(sequence_), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void AnswerGate::Open() {
  sequence_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0)
    syscall(SYS_futex, Word(sequence_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

OpenAfterAnswers::OpenAfterAnswers() { active_batch = this; }

OpenAfterAnswers::~OpenAfterAnswers() {
  active_batch = nullptr;
  for (const auto& gate : gates_) gate->Open();
}

void OpenAfterAnswers::OpenSoon(std::shared_ptr<AnswerGate> gate) {
  OpenAfterAnswers* batch = active_batch;
  if (batch == nullptr) {
    gate->Open();
    return;
  }
  // A few distinct gates per pass: a linear look beats hashing.
  if (std::find(batch->gates_.begin(), batch->gates_.end(), gate) == batch->gates_.end())
    batch->gates_.push_back(std::move(gate));
}

}  // namespace cellar::internal
