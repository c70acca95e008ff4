#include "changelog/keyed_executor.h"

#include <chrono>

#include "base/thread_name.h"

namespace cellar {
namespace {

// Finished slots of a key's queue dropped at once (KeyQueue::head).
constexpr size_t kCompactAfter = 64;

}  // namespace

KeyedExecutor::KeyedExecutor(int threads, std::string thread_name) {
  for (int i = 0; i < threads; ++i)
    threads_.push_back(NamedThread(thread_name, [this] { Loop(); }));
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
  if (newly_ready >= threads_.size())
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

void KeyedExecutor::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void KeyedExecutor::Loop() {
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
    lock.Unlock();
    task();
    task = nullptr;  // its captures are released outside the lock
    lock.Lock();
    if (++q.head == q.tasks.size()) {
      queues_.erase(queues_.find(entry->first));
    } else {
      // A row that never runs dry would otherwise keep every finished slot.
      if (q.head >= kCompactAfter && q.head * 2 >= q.tasks.size()) {
        q.tasks.erase(q.tasks.begin(), q.tasks.begin() + static_cast<std::ptrdiff_t>(q.head));
        q.head = 0;
      }
      ready_.push_back(entry);
      cv_.NotifyOne();
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
