// WorkloadThread: one thread of the history workload (workload.h): its rows,
// its random choices and its client. Not thread-safe: one thread runs it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "client/cellar_client.h"
#include "tests/history/history.h"
#include "tests/history/violations.h"

namespace cellar::history {

class WorkloadThread {
 public:
  // `drivers` and `cities` are the values bodies draw from (the same for every thread).
  WorkloadThread(int index, uint64_t seed, std::unique_ptr<Client> client,
                 std::vector<Uuid> drivers, std::vector<Uuid> cities, Violations* violations);

  // Runs operations until `stop`; adds one to `operations` per operation.
  void Run(const std::atomic<bool>& stop, std::atomic<uint64_t>& operations);

  std::vector<RowHistory>& rows() { return rows_; }
  const OpCounts& counts() const { return counts_; }

 private:
  using Call = std::function<Result<PutResult>()>;

  void RunOne(OpKind kind);
  // A row to work on: a new one now and then, else a random one that is not
  // abandoned and passes `usable` (nullptr when there is none).
  RowHistory* PickRow(const std::function<bool(const RowHistory&)>& usable, bool allow_new);
  RowHistory* NewRow();
  nlohmann::json Body();
  // Calls `call` until its answer is not an unknown outcome (Unavailable and
  // the like) or a minute passed; returns the last answer.
  Result<PutResult> Persist(const Call& call);
  // Records the answer to the write of `r.versions.back()`; false if not acknowledged.
  bool Settle(RowHistory& r, const Result<PutResult>& answer, OpKind kind);
  void Violation(const std::string& check, const RowHistory& r, const std::string& detail);

  void Put();
  void Batch();
  void Erase();
  void EraseAgain();
  void ConflictingRetry();
  void IdenticalRetry();
  void Read();

  int index_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  std::vector<Uuid> drivers_, cities_;
  Violations* violations_;
  std::vector<RowHistory> rows_;
  OpCounts counts_;
  uint64_t seq_ = 0;
};

// Whether a failed call may still have been carried out (retry it).
bool UnknownOutcome(const Status& s);

}  // namespace cellar::history
