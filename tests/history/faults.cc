#include "tests/history/faults.h"

#include <algorithm>
#include <iostream>
#include <thread>

namespace cellar::history {

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillRelay:
      return "kill_relay";
    case Fault::kKillIndexer:
      return "kill_index_worker";
    case Fault::kKillTrigger:
      return "kill_trigger";
    case Fault::kKillNode:
      return "kill_worker_node";
    case Fault::kRestartBroker:
      return "restart_broker";
    case Fault::kCrashDatabase:
      return "crash_mariadb_host";
    case Fault::kFailOverDatabase:
      return "kill_mariadb_primary_and_fail_over";
  }
  return "?";
}

bool FaultInjector::Run(std::chrono::steady_clock::time_point until) {
  // The broker restart opens each round: the new broker starts empty and the
  // relay republishes everything, which would hide what earlier faults did to
  // the change log; so each round's relay kills come after its broker restart.
  std::array<Fault, kFaultKinds> round = {
      Fault::kRestartBroker, Fault::kKillRelay,     Fault::kKillIndexer,     Fault::kKillTrigger,
      Fault::kKillNode,      Fault::kCrashDatabase, Fault::kFailOverDatabase};
  while (true) {
    std::shuffle(round.begin() + 1, round.end(), rng_);
    for (Fault f : round) {
      if (!Pause(1000, 4000, until)) return Heal();
      if (!Inject(f)) return false;
    }
  }
}

bool FaultInjector::Pause(int min_ms, int max_ms, std::chrono::steady_clock::time_point until) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(min_ms + rng_() % (max_ms - min_ms));
  while (std::chrono::steady_clock::now() < end) {
    if (std::chrono::steady_clock::now() >= until) return false;
    if (!Heal()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the pause itself
  }
  return std::chrono::steady_clock::now() < until;
}

bool FaultInjector::Heal() {
  for (Component c : kAllComponents) {
    if (stack_->Running(c)) continue;
    ++unexpected_exits_;
    std::cerr << "history: " << ComponentName(c) << " was not running; starting it again\n";
    if (!stack_->Launch(c)) return false;
  }
  return true;
}

bool FaultInjector::Inject(Fault f) {
  ++injected_[static_cast<size_t>(f)];
  std::cerr << "history: fault " << FaultName(f) << "\n";
  auto kill_and_restart = [&](Component c) {
    stack_->Kill(c);
    // A random time down before the restart (a supervisor's delay).
    std::this_thread::sleep_for(std::chrono::milliseconds(rng_() % 1500));
    return stack_->Launch(c);
  };
  switch (f) {
    case Fault::kKillRelay:
      return kill_and_restart(Component::kRelay);
    case Fault::kKillIndexer:
      return kill_and_restart(Component::kIndexer);
    case Fault::kKillTrigger:
      return kill_and_restart(Component::kTrigger);
    case Fault::kKillNode:
      return kill_and_restart(rng_() % 2 ? Component::kNode1 : Component::kNode2);
    case Fault::kRestartBroker:
      return stack_->RestartBroker();
    case Fault::kCrashDatabase:
      return stack_->CrashAndRestartDatabase(1);
    case Fault::kFailOverDatabase:
      return stack_->FailOverDatabase();
  }
  return false;
}

}  // namespace cellar::history
