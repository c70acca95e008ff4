#include "cells/sql_call_counts.h"

#include <pthread.h>

#include <atomic>
#include <memory>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace cellar {
namespace {

struct NameCounts {
  std::atomic<uint64_t> statements{0}, commits{0};
};

struct Registry {
  Mutex mu;
  // Entries are never removed: a thread's cached pointer stays valid.
  std::map<std::string, std::unique_ptr<NameCounts>> by_name GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: threads may count during exit
  return *registry;
}

NameCounts& ThisThreadCounts() {
  thread_local NameCounts* const counts = [] {
    char name[16] = {};  // Linux keeps 15 bytes and the terminator
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
    Registry& r = TheRegistry();
    MutexLock lock(&r.mu);
    std::unique_ptr<NameCounts>& slot = r.by_name[name];
    if (!slot) slot = std::make_unique<NameCounts>();
    return slot.get();
  }();
  return *counts;
}

}  // namespace

std::map<std::string, SqlCallCounts> SqlCallCountsByThreadName() {
  std::map<std::string, SqlCallCounts> out;
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  for (const auto& [name, counts] : r.by_name)
    out[name] = {counts->statements.load(std::memory_order_relaxed),
                 counts->commits.load(std::memory_order_relaxed)};
  return out;
}

void CountSqlStatement() { ThisThreadCounts().statements.fetch_add(1, std::memory_order_relaxed); }

void CountSqlCommit() { ThisThreadCounts().commits.fetch_add(1, std::memory_order_relaxed); }

}  // namespace cellar
