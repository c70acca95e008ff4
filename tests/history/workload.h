// Workload: the seeded random operations of a history run, sent through the
// C++ client (cellar::Client) to both worker nodes by a few threads, and
// recorded (history.h) for the checks.
//
// Each thread owns its rows (no two threads write one row), so the state a
// row must end in follows from what its thread had acknowledged. Operations
// on trips/BASE: put of a new version, put_batch over 1-3 rows, erase of the
// live latest version (expected_ref_key), erase again of an erased column, a
// conflicting retry (an existing address with another body), an identical
// retry, and latest() compared with the acknowledged state. A call answered
// Unavailable (every attempt of the client failed: a node, a MariaDB host
// down) is repeated, as a service would, for up to a minute; a write still
// unanswered then is recorded as unacknowledged and its row left alone.
// Answers that break a contract (a conflicting retry accepted, an erase
// retried into a second tombstone, a read not returning the acknowledged
// state) are recorded as violations at once.
//
// Bodies, row keys, drivers and the choice of operations follow from the
// seed; what the faults make of them does not.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "tests/history/history.h"
#include "tests/history/violations.h"

namespace cellar::history {

class WorkloadThread;

class Workload {
 public:
  Workload(std::vector<std::string> endpoints, uint64_t seed, int threads, Violations* violations);
  ~Workload();  // Stop()
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  // Creates the clients and starts the threads.
  Status Start();
  // Asks every thread to finish its current operation (with its retries) and joins them.
  void Stop();
  // Operations attempted so far (progress; thread-safe).
  uint64_t operations() const { return operations_; }
  // Every thread's rows and counts. REQUIRES: Stop() returned.
  History TakeHistory();

 private:
  std::vector<std::string> endpoints_;
  uint64_t seed_;
  int threads_;
  Violations* violations_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> operations_{0};
  std::vector<std::unique_ptr<WorkloadThread>> workers_;
  std::vector<std::thread> running_;
};

}  // namespace cellar::history
