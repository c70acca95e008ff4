#include "tests/history/workload_thread.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/time.h"
#include "tests/history/stack.h"

namespace cellar::history {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMaxRowsPerThread = 400;
constexpr auto kPersistFor = 60s;  // how long a service keeps retrying one write
constexpr int64_t kTripEpoch = 1767225600LL * 1000000;  // 2026-01-01T00:00:00Z

std::string Where(const RowHistory& r) { return "row " + r.row.ToString(); }

}  // namespace

bool UnknownOutcome(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kAborted ||
         s.code() == StatusCode::kDeadlineExceeded || s.code() == StatusCode::kInternal;
}

WorkloadThread::WorkloadThread(int index, uint64_t seed, std::unique_ptr<Client> client,
                               std::vector<Uuid> drivers, std::vector<Uuid> cities,
                               Violations* violations)
    : index_(index),
      rng_(seed * 7919 + static_cast<uint64_t>(index) + 1),
      client_(std::move(client)),
      drivers_(std::move(drivers)),
      cities_(std::move(cities)),
      violations_(violations) {}

void WorkloadThread::Run(const std::atomic<bool>& stop, std::atomic<uint64_t>& operations) {
  // Weights of put, batch, erase, erase again, conflicting retry, identical retry, read.
  static constexpr int kWeights[kOpKinds] = {30, 15, 10, 5, 10, 10, 20};
  std::discrete_distribution<size_t> pick(std::begin(kWeights), std::end(kWeights));
  while (!stop.load()) {
    RunOne(static_cast<OpKind>(pick(rng_)));
    ++operations;
  }
}

void WorkloadThread::RunOne(OpKind kind) {
  switch (kind) {
    case OpKind::kPut:
      return Put();
    case OpKind::kBatch:
      return Batch();
    case OpKind::kErase:
      return Erase();
    case OpKind::kEraseAgain:
      return EraseAgain();
    case OpKind::kConflictingRetry:
      return ConflictingRetry();
    case OpKind::kIdenticalRetry:
      return IdenticalRetry();
    case OpKind::kRead:
      return Read();
  }
}

RowHistory* WorkloadThread::NewRow() {
  if (rows_.size() >= kMaxRowsPerThread) return nullptr;
  std::string bytes(16, '\0');
  for (char& b : bytes) b = static_cast<char>(rng_() & 0xff);
  rows_.push_back(RowHistory{Uuid::FromBytes(bytes), {}, false});
  return &rows_.back();
}

RowHistory* WorkloadThread::PickRow(const std::function<bool(const RowHistory&)>& usable,
                                    bool allow_new) {
  if (allow_new && (rows_.empty() || rng_() % 100 < 12))
    if (RowHistory* r = NewRow()) return r;
  for (int attempt = 0; attempt < 8 && !rows_.empty(); ++attempt) {
    RowHistory& r = rows_[rng_() % rows_.size()];
    if (!r.abandoned && usable(r)) return &r;
  }
  return allow_new ? NewRow() : nullptr;
}

nlohmann::json WorkloadThread::Body() {
  const double fare = rng_() % 4 == 0 ? 0.0 : static_cast<double>(5 + rng_() % 50);
  return {{"driver_partner_uuid", drivers_[rng_() % drivers_.size()].ToString()},
          {"city_uuid", cities_[rng_() % cities_.size()].ToString()},
          {"trip_created_at",
           FormatRfc3339(kTripEpoch + static_cast<int64_t>(rng_() % 10000000) * 1000000)},
          {"fare", {{"total", fare}, {"currency", "USD"}}},
          {"status", "completed"},
          {"seq", std::to_string(index_) + "." + std::to_string(++seq_)}};
}

Result<PutResult> WorkloadThread::Persist(const Call& call) {
  const auto deadline = std::chrono::steady_clock::now() + kPersistFor;
  while (true) {
    Result<PutResult> r = call();
    if (r.ok() || !UnknownOutcome(r.status()) || std::chrono::steady_clock::now() >= deadline)
      return r;
    ++counts_.retried_calls;
    // Back-off of a retrying service (the client already backed off between its attempts).
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng_() % 200));
  }
}

void WorkloadThread::Violation(const std::string& check, const RowHistory& r,
                               const std::string& detail) {
  violations_->Add(check, Where(r) + ": " + detail);
}

bool WorkloadThread::Settle(RowHistory& r, const Result<PutResult>& answer, OpKind kind) {
  WrittenVersion& v = r.versions.back();
  if (answer.ok()) {
    v.acknowledged = true;
    ++counts_.acknowledged[static_cast<size_t>(kind)];
    if (answer->ref_key != v.ref_key)
      Violation("write contract", r,
                std::string(OpKindName(kind)) + " of ref_key " + std::to_string(v.ref_key) +
                    " answered ref_key " + std::to_string(answer->ref_key));
    return true;
  }
  r.abandoned = true;
  if (UnknownOutcome(answer.status())) {
    ++counts_.unacknowledged;
  } else {
    Violation("write contract", r,
              std::string(OpKindName(kind)) + " of ref_key " + std::to_string(v.ref_key) +
                  " answered " + answer.status().ToString());
  }
  return false;
}

void WorkloadThread::Put() {
  RowHistory* r = PickRow([](const RowHistory&) { return true; }, true);
  if (r == nullptr) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kPut)];
  r->versions.push_back(WrittenVersion{r->NextRef(), false, Body(), false});
  const CellWrite w{r->row, "BASE", r->versions.back().ref_key, r->versions.back().body};
  Settle(*r, Persist([&] { return client_->Put(kDatastore, w); }), OpKind::kPut);
}

void WorkloadThread::Batch() {
  ++counts_.attempted[static_cast<size_t>(OpKind::kBatch)];
  // Indexes first: picking may add rows (and move them).
  std::vector<size_t> picked;
  const size_t want = 1 + rng_() % 3;
  for (size_t i = 0; i < want; ++i) {
    RowHistory* r = PickRow([](const RowHistory&) { return true; }, true);
    if (r == nullptr) continue;
    const size_t at = static_cast<size_t>(r - rows_.data());
    if (std::find(picked.begin(), picked.end(), at) == picked.end()) picked.push_back(at);
  }
  std::vector<RowHistory*> rows;
  for (size_t at : picked) rows.push_back(&rows_[at]);
  std::vector<CellWrite> cells;
  std::vector<std::pair<RowHistory*, size_t>> owner;  // (row, index in its versions)
  for (RowHistory* r : rows) {
    const int versions = 1 + static_cast<int>(rng_() % 2);
    for (int k = 0; k < versions; ++k) {
      r->versions.push_back(WrittenVersion{r->NextRef(), false, Body(), false});
      cells.push_back(
          CellWrite{r->row, "BASE", r->versions.back().ref_key, r->versions.back().body});
      owner.emplace_back(r, r->versions.size() - 1);
    }
  }
  if (cells.empty()) return;
  std::vector<Result<PutResult>> results = client_->PutBatch(kDatastore, cells);
  for (size_t i = 0; i < cells.size() && i < results.size(); ++i) {
    auto [r, v] = owner[i];
    if (results[i].ok()) {
      r->versions[v].acknowledged = true;
      if (results[i]->ref_key != cells[i].ref_key)
        Violation("write contract", *r, "batch cell answered another ref_key");
      continue;
    }
    if (!UnknownOutcome(results[i].status())) {
      Violation("write contract", *r,
                "batch cell ref_key " + std::to_string(cells[i].ref_key) + " answered " +
                    results[i].status().ToString());
      r->abandoned = true;
    }
  }
  // Cells without an answer are retried one by one, in ref_key order per row.
  for (size_t i = 0; i < cells.size(); ++i) {
    auto [r, v] = owner[i];
    if (r->versions[v].acknowledged || r->abandoned) continue;
    ++counts_.retried_calls;
    Result<PutResult> answer = Persist([&] { return client_->Put(kDatastore, cells[i]); });
    if (answer.ok()) {
      r->versions[v].acknowledged = true;
    } else {
      r->abandoned = true;
      if (UnknownOutcome(answer.status())) {
        ++counts_.unacknowledged;
      } else {
        Violation("write contract", *r, "batch cell retry answered " + answer.status().ToString());
      }
    }
  }
  bool acked = true;
  for (const auto& [r, v] : owner) acked = acked && r->versions[v].acknowledged;
  if (acked) ++counts_.acknowledged[static_cast<size_t>(OpKind::kBatch)];
}

void WorkloadThread::Erase() {
  RowHistory* r = PickRow(
      [](const RowHistory& h) { return !h.versions.empty() && !h.versions.back().tombstone; },
      false);
  if (r == nullptr) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kErase)];
  const int64_t expected = r->versions.back().ref_key;
  // The tombstone goes directly above the live latest version (nothing expires here).
  r->versions.push_back(WrittenVersion{expected + 1, true, nullptr, false});
  Result<PutResult> answer =
      Persist([&] { return client_->Erase(kDatastore, r->row, "BASE", expected); });
  Settle(*r, answer, OpKind::kErase);
}

void WorkloadThread::EraseAgain() {
  RowHistory* r = PickRow(
      [](const RowHistory& h) { return !h.versions.empty() && h.versions.back().tombstone; },
      false);
  if (r == nullptr) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kEraseAgain)];
  const int64_t tombstone = r->versions.back().ref_key;
  // Half of them as a retry of the erase that wrote it (same expected_ref_key).
  std::optional<int64_t> expected;
  if (rng_() % 2 == 0) expected = tombstone - 1;
  Result<PutResult> answer =
      Persist([&] { return client_->Erase(kDatastore, r->row, "BASE", expected); });
  if (!answer.ok()) {
    if (!UnknownOutcome(answer.status()))
      Violation("one tombstone per erase", *r,
                "erase of an erased column answered " + answer.status().ToString());
    return;  // nothing is written either way
  }
  ++counts_.acknowledged[static_cast<size_t>(OpKind::kEraseAgain)];
  if (answer->created || answer->ref_key != tombstone)
    Violation("one tombstone per erase", *r,
              "erase of a column erased at ref_key " + std::to_string(tombstone) +
                  " answered created=" + (answer->created ? "true" : "false") + " ref_key " +
                  std::to_string(answer->ref_key));
}

void WorkloadThread::ConflictingRetry() {
  RowHistory* r = PickRow(
      [](const RowHistory& h) { return !h.versions.empty() && h.versions.back().acknowledged; },
      false);
  if (r == nullptr) return;
  const WrittenVersion& v = r->versions[rng_() % r->versions.size()];
  if (v.tombstone || !v.acknowledged) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kConflictingRetry)];
  nlohmann::json other = v.body;
  other["seq"] = "conflict." + std::to_string(++seq_);
  const CellWrite w{r->row, "BASE", v.ref_key, other};
  Result<PutResult> answer = Persist([&] { return client_->Put(kDatastore, w); });
  if (!answer.ok() && answer.status().code() == StatusCode::kConflict) {
    ++counts_.acknowledged[static_cast<size_t>(OpKind::kConflictingRetry)];
  } else if (answer.ok() || !UnknownOutcome(answer.status())) {
    Violation("conflicting retries", *r,
              "a put of existing ref_key " + std::to_string(v.ref_key) +
                  " with another body answered " +
                  (answer.ok() ? "OK" : answer.status().ToString()));
  }
}

void WorkloadThread::IdenticalRetry() {
  RowHistory* r = PickRow(
      [](const RowHistory& h) { return !h.versions.empty() && h.versions.back().acknowledged; },
      false);
  if (r == nullptr) return;
  const WrittenVersion& v = r->versions[rng_() % r->versions.size()];
  if (v.tombstone || !v.acknowledged) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kIdenticalRetry)];
  const CellWrite w{r->row, "BASE", v.ref_key, v.body};
  Result<PutResult> answer = Persist([&] { return client_->Put(kDatastore, w); });
  if (answer.ok() && !answer->created) {
    ++counts_.acknowledged[static_cast<size_t>(OpKind::kIdenticalRetry)];
  } else if (answer.ok() || !UnknownOutcome(answer.status())) {
    Violation("conflicting retries", *r,
              "an identical put of ref_key " + std::to_string(v.ref_key) + " answered " +
                  (answer.ok() ? "created=true" : answer.status().ToString()));
  }
}

void WorkloadThread::Read() {
  RowHistory* r = PickRow(
      [](const RowHistory& h) { return !h.versions.empty() && h.versions.back().acknowledged; },
      false);
  if (r == nullptr) return;
  ++counts_.attempted[static_cast<size_t>(OpKind::kRead)];
  const WrittenVersion& last = r->versions.back();
  Result<Cell> got = client_->Latest(kDatastore, r->row, "BASE");
  if (!got.ok() && UnknownOutcome(got.status())) return;  // a fault: not a violation
  ++counts_.acknowledged[static_cast<size_t>(OpKind::kRead)];
  if (last.tombstone) {
    if (got.ok() || got.status().code() != StatusCode::kNotFound)
      Violation(
          "acknowledged writes readable", *r,
          "latest() after an acknowledged erase at ref_key " + std::to_string(last.ref_key) +
              " answered " +
              (got.ok() ? "ref_key " + std::to_string(got->ref_key) : got.status().ToString()));
  } else if (!got.ok() || got->ref_key != last.ref_key || got->body != last.body) {
    Violation("acknowledged writes readable", *r,
              "latest() after an acknowledged put of ref_key " + std::to_string(last.ref_key) +
                  " answered " +
                  (got.ok() ? "ref_key " + std::to_string(got->ref_key) + " " + got->body.dump()
                            : got.status().ToString()));
  }
}

}  // namespace cellar::history
