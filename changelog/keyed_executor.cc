#include "changelog/keyed_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/thread_name.h"

namespace cellar {
namespace {

// Finished slots of a key's queue dropped at once (KeyQueue::head).
constexpr size_t kCompactAfter = 64;

// A running task's state (KeyQueue::running_state). The task's return and
// Detach() race on it: whichever changes kRunning first decides.
constexpr int kRunning = 0, kReturned = 1, kDetached = 2;

// The task the calling thread runs, and its pool (Current()).
thread_local const KeyedExecutor* current_pool = nullptr;
thread_local const std::string* current_key = nullptr;
thread_local uint64_t current_ticket = 0;

}  // namespace

KeyedExecutor::KeyedExecutor(int threads, std::string thread_name)
    : thread_name_(std::move(thread_name)), pool_size_(static_cast<size_t>(std::max(threads, 0))) {
  MutexLock lock(&mu_);
  for (int i = 0; i < threads; ++i)
    threads_.push_back(NamedThread(thread_name_, [this] { Loop(); }));
}

KeyedExecutor::~KeyedExecutor() { Shutdown(); }

bool KeyedExecutor::Enqueue(const std::string& key, std::function<void()> task) {
  auto [it, added] = queues_.try_emplace(key);
  KeyQueue& q = it->second;
  q.tasks.push_back(std::move(task));
  ++pending_;
  // A key is in ready_ or running exactly while its queue is non-empty and it
  // was not already scheduled: schedule only on the empty -> non-empty edge.
  if (q.tasks.size() - q.head != 1) return false;
  ready_.push_back(&*it);
  return true;
}

void KeyedExecutor::Submit(const std::string& key, std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    Enqueue(key, std::move(task));
  }
  cv_.NotifyOne();
}

void KeyedExecutor::SubmitMany(std::vector<std::pair<std::string, std::function<void()>>> tasks) {
  size_t newly_ready = 0;
  {
    MutexLock lock(&mu_);
    for (auto& [key, task] : tasks)
      if (Enqueue(key, std::move(task))) ++newly_ready;
  }
  if (newly_ready >= pool_size_)
    cv_.NotifyAll();
  else
    for (size_t i = 0; i < newly_ready; ++i) cv_.NotifyOne();
}

size_t KeyedExecutor::pending() const {
  MutexLock lock(&mu_);
  return pending_;
}

bool KeyedExecutor::WaitIdle(int timeout_ms) {
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (pending_ != 0)
    if (!idle_cv_.WaitUntil(&mu_, deadline)) return pending_ == 0;
  return true;
}

KeyedExecutor::RunningTask KeyedExecutor::Current() const {
  if (current_pool != this) return {};
  return {*current_key, current_ticket};
}

bool KeyedExecutor::Detach(const RunningTask& task, std::function<void()> continuation) {
  {
    MutexLock lock(&mu_);
    auto it = queues_.find(task.key);
    if (task.ticket == 0 || it == queues_.end() || it->second.running != task.ticket) return false;
    KeyQueue& q = it->second;
    int running = kRunning;
    if (!q.running_state->compare_exchange_strong(running, kDetached))
      return false;  // it returned just now
    // The task's thread is on its own from here: neither joined nor waited
    // for (unless Shutdown() already took it to join).
    auto t = std::find_if(threads_.begin(), threads_.end(),
                          [&](const std::thread& th) { return th.get_id() == q.running_thread; });
    if (t != threads_.end()) {
      t->detach();
      threads_.erase(t);
    }
    q.tasks[q.head] = std::move(continuation);  // the slot the task was moved out of
    q.running = 0;
    q.running_state = nullptr;
    ready_.push_back(&*it);
    threads_.push_back(NamedThread(thread_name_, [this] { Loop(); }));
  }
  cv_.NotifyOne();
  return true;
}

void KeyedExecutor::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  // A Detach() meanwhile adds a thread: join until none is left.
  while (true) {
    std::vector<std::thread> threads;
    {
      MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    if (threads.empty()) return;
    for (auto& t : threads) t.join();
  }
}

void KeyedExecutor::Loop() {
  // The state of the task this thread runs (Detach). On this thread's stack:
  // a detached thread touches nothing of the pool, which may be gone, after
  // its task returns.
  std::atomic<int> state{kReturned};
  MutexLock lock(&mu_);
  while (true) {
    while (!(!ready_.empty() || (stopping_ && pending_ == 0))) cv_.Wait(&mu_);
    if (ready_.empty()) return;  // stopping and drained
    Queues::value_type* entry = ready_.front();
    ready_.pop_front();
    // The task stays counted at the head of its queue while it runs, so the
    // key is not rescheduled by Enqueue() meanwhile.
    KeyQueue& q = entry->second;
    std::function<void()> task = std::move(q.tasks[q.head]);
    q.running = ++last_ticket_;
    q.running_state = &state;
    q.running_thread = std::this_thread::get_id();
    state.store(kRunning);
    current_pool = this;
    current_key = &entry->first;
    current_ticket = q.running;
    lock.Unlock();
    task();
    task = nullptr;  // its captures are released outside the lock
    current_pool = nullptr;
    int running = kRunning;
    // Detached: the key went on without this task and another thread took
    // this one's place; the pool may be gone.
    if (!state.compare_exchange_strong(running, kReturned)) return;
    lock.Lock();
    q.running = 0;
    q.running_state = nullptr;
    if (++q.head == q.tasks.size()) {
      queues_.erase(queues_.find(entry->first));
    } else {
      // A row that never runs dry would otherwise keep every finished slot.
      if (q.head >= kCompactAfter && q.head * 2 >= q.tasks.size()) {
        q.tasks.erase(q.tasks.begin(), q.tasks.begin() + static_cast<std::ptrdiff_t>(q.head));
        q.head = 0;
      }
      ready_.push_back(entry);
      // This thread takes the front of ready_ next: wake another only when
      // the key is not that one.
      if (ready_.size() > 1) cv_.NotifyOne();
    }
    if (--pending_ == 0) {
      idle_cv_.NotifyAll();
      // Shutdown() woke every thread, but while this task was still counted,
      // so they went back to sleep: they may leave only now.
      if (stopping_) cv_.NotifyAll();
    }
  }
}

}  // namespace cellar
