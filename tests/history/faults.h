// FaultInjector: the faults of a history run, injected into a Stack in a
// seeded random order with random pauses between them: SIGKILL of the relay,
// the index worker, the trigger and a worker node (each started again after
// a short random pause), a crash and restart of the broker, a crash and
// restart of the MariaDB host without replicas, and the SIGKILL of the
// replicated host's primary followed by an emergency failover.
// Every kind comes once in each round: the broker restart first (it wipes
// the change log, see faults.cc), the others in a new order per round.
//
// It runs on the stack's thread (the test's main thread), which starts every
// process. A component that exits on its own is logged, counted and started
// again.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>

#include "tests/history/stack.h"

namespace cellar::history {

enum class Fault {
  kKillRelay,
  kKillIndexer,
  kKillTrigger,
  kKillNode,
  kRestartBroker,
  kCrashDatabase,    // db2, a host without replicas: crash and restart
  kFailOverDatabase  // db1: SIGKILL of its primary, emergency failover, rejoin
};
constexpr size_t kFaultKinds = 7;
const char* FaultName(Fault f);

class FaultInjector {
 public:
  FaultInjector(Stack* stack, uint64_t seed) : stack_(stack), rng_(seed ^ 0x5eedfa17) {}

  // Injects faults until `until`. False (after printing why) when a component
  // or server could not be started again: the run cannot go on.
  bool Run(std::chrono::steady_clock::time_point until);
  // Starts again every component that is not running; false when one fails to start.
  bool Heal();

  const std::array<uint64_t, kFaultKinds>& injected() const { return injected_; }
  uint64_t unexpected_exits() const { return unexpected_exits_; }

 private:
  bool Inject(Fault f);
  // A deliberate random pause of [min_ms, max_ms) before the next step, during
  // which exited components are started again.
  bool Pause(int min_ms, int max_ms, std::chrono::steady_clock::time_point until);

  Stack* stack_;
  std::mt19937_64 rng_;
  std::array<uint64_t, kFaultKinds> injected_{};
  uint64_t unexpected_exits_ = 0;
};

}  // namespace cellar::history
