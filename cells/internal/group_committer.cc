#include "cells/internal/group_committer.h"

#include <algorithm>
#include <map>

#include "base/log.h"
#include "base/thread_name.h"
#include "cells/internal/write_fence.h"

namespace cellar::internal {
namespace {

void Finish(WriteUnit* u, const Status& error) {
  if (!error.ok()) {
    u->results.clear();
    for (size_t i = 0; i < u->cells.size(); ++i) u->results.emplace_back(error);
  }
  u->completion->UnitDone(u);
}

constexpr int kDeadlockRetries = 3;

// commit_interval_us holds no unit whose caller is blocked on its answer
// (WriteUnit::caller_waits), and only while puts arrive as transactions run:
// one of the last kPacingMemory transactions saw some arrive (a put arriving
// just after a commit now and then does not end it). None arriving: the
// callers wait for their answers before their next puts. Then it holds at
// any rate until min_pipelined_cells cells wait: unheld, a host's writers
// committed what arrived during the previous commit, ~7 cells at 4,000
// writes/s, each transaction paying its statement set-up and fsync
// (docs/cost-per-write.md, session 58).
constexpr int kPacingMemory = 4;
constexpr unsigned kMemoryMask = (1u << kPacingMemory) - 1;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

GroupCommitter::GroupCommitter(TopologyView* topology, size_t host, GroupCommitterOptions options,
                               GroupCommitProbe* probe)
    : topology_(topology), host_(host), options_(std::move(options)), probe_(probe) {
  answerer_ = NamedThread("commit-answer", [this] { AnswerLoop(); });
  for (int i = 0; i < options_.threads; ++i)
    threads_.push_back(NamedThread("commit-writer", [this] { WriterLoop(); }));
}

GroupCommitter::~GroupCommitter() { Stop(); }

void GroupCommitter::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
  threads_.clear();
  {
    MutexLock lock(&answer_mu_);
    answer_stop_ = true;
  }
  answer_cv_.NotifyAll();
  if (answerer_.joinable()) answerer_.join();
  std::deque<WriteUnit*> left;
  {
    MutexLock lock(&mu_);
    left.swap(queue_);
    queued_cells_ = 0;
    queued_waiting_callers_ = 0;
    if (probe_) probe_->SetQueuedCells(0);
  }
  // Outside the lock: a completion may submit again (and be refused).
  for (WriteUnit* u : left) Finish(u, Unavailable("the cell store is closing"));
}

void GroupCommitter::Submit(const std::vector<WriteUnit*>& units) {
  bool refused = false, wake = false;
  {
    MutexLock lock(&mu_);
    refused = stopping_;
    if (!refused) {
      queue_.insert(queue_.end(), units.begin(), units.end());
      for (size_t i = 0; i < units.size(); ++i) {
        units[i]->completion->OfferGate(forming_gate_);
        units[i]->joins_previous = i > 0;
        queued_cells_ += units[i]->cells.size();
        submitted_cells_ += units[i]->cells.size();
        if (units[i]->caller_waits) ++queued_waiting_callers_;
      }
      wake = WriterMayStart() && (lingering_for_ == 0 || queue_.size() >= lingering_for_) &&
             (!pacing_ || queued_cells_ >= static_cast<size_t>(options_.min_pipelined_cells) ||
              queued_waiting_callers_ > 0);
      // Per put only while a backlog builds (writers behind, a host hung):
      // below one transaction's worth the writers' updates say enough, and a
      // store per put looked like 1-2% of single-put throughput in
      // alternating cellar-bench put runs (within their noise).
      if (probe_ && queued_cells_ > static_cast<size_t>(options_.max_batch_cells))
        probe_->SetQueuedCells(queued_cells_);
    }
  }
  if (refused) {
    for (WriteUnit* u : units) Finish(u, Unavailable("the cell store is closed"));
    return;
  }
  if (wake) cv_.NotifyOne();
}

bool GroupCommitter::PutsArriveDuringCommits() const { return some_arrived_ != 0; }

bool GroupCommitter::WriterMayStart() const {
  return !queue_.empty() &&
         (in_flight_ == 0 || queued_cells_ >= static_cast<size_t>(options_.min_pipelined_cells));
}

void GroupCommitter::WriterLoop() {
  WriterConnection conn;
  std::vector<WriteUnit*> units;
  size_t expect = 0;
  uint64_t submitted_at_start = 0;
  Clock::time_point linger_until;
  while (true) {
    units.clear();
    const Clock::time_point waiting_since = Clock::now();
    {
      MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        if (WriterMayStart()) {
          if (in_flight_ == 0 && expect > 1 && queue_.size() < expect &&
              Clock::now() < linger_until) {
            lingering_for_ = expect;
            cv_.WaitUntil(&mu_, linger_until);
            lingering_for_ = 0;
            continue;
          }
          if (options_.commit_interval_us > 0 && queued_waiting_callers_ == 0 &&
              PutsArriveDuringCommits() &&
              queued_cells_ < static_cast<size_t>(options_.min_pipelined_cells)) {
            const Clock::time_point next =
                last_start_ + std::chrono::microseconds(options_.commit_interval_us);
            if (Clock::now() < next) {
              pacing_ = true;
              cv_.WaitUntil(&mu_, next);
              pacing_ = false;
              continue;
            }
          }
          break;
        }
        cv_.Wait(&mu_);
      }
      // Everything waiting, up to max_batch_cells: one transaction, one fsync.
      size_t cells = 0;
      while (!queue_.empty() &&
             (units.empty() || cells + queue_.front()->cells.size() <=
                                   static_cast<size_t>(options_.max_batch_cells))) {
        cells += queue_.front()->cells.size();
        if (queue_.front()->caller_waits) --queued_waiting_callers_;
        units.push_back(queue_.front());
        queue_.pop_front();
      }
      // The rest of an odd-sized batch leads the next transaction.
      for (size_t keep = UnitsForOneStatement(units); units.size() > keep; units.pop_back()) {
        cells -= units.back()->cells.size();
        if (units.back()->caller_waits) ++queued_waiting_callers_;
        queue_.push_front(units.back());
      }
      queued_cells_ -= cells;
      // Units left in the queue keep the gate they were offered.
      forming_gate_ = std::make_shared<AnswerGate>();
      if (probe_) probe_->SetQueuedCells(queued_cells_);
      ++in_flight_;
      submitted_at_start = submitted_cells_;
      last_start_ = Clock::now();
      // Another writer may start too if enough is still waiting.
      if (WriterMayStart()) cv_.NotifyOne();
    }
    expect = units.size();
    if (probe_) probe_->waiting().Observe(SecondsSince(waiting_since, Clock::now()));
    Commit(conn, units);
    linger_until = Clock::now() + std::chrono::microseconds(options_.linger_us);
    // This thread loops back and takes whatever waited for the commit to end.
    MutexLock lock(&mu_);
    --in_flight_;
    const uint64_t arrived = submitted_cells_ - submitted_at_start;
    some_arrived_ = ((some_arrived_ << 1) | (arrived > 0 ? 1u : 0u)) & kMemoryMask;
  }
}

void GroupCommitter::Commit(WriterConnection& writer, std::vector<WriteUnit*>& units) {
  std::map<std::string, size_t> index;  // datastore -> batches[i]
  std::vector<DatastoreBatch> batches;
  for (WriteUnit* u : units) {
    auto [it, added] = index.emplace(u->datastore, batches.size());
    if (added) batches.push_back(DatastoreBatch{u->datastore, {}});
    batches[it->second].units.push_back(u);
  }
  const Clock::time_point start = Clock::now();
  Status status = CommitWithRetries(writer, batches);
  MysqlConnection* conn = writer.conn.get();
  const Clock::time_point committed = Clock::now();
  if (probe_) {
    size_t cells = 0;
    for (const WriteUnit* u : units) cells += u->cells.size();
    probe_->committing().Observe(SecondsSince(start, committed));
    probe_->TransactionEnded(status.ok(), cells);
  }
  std::vector<std::pair<WriteUnit*, Status>> answers;
  answers.reserve(units.size());
  if (!status.ok() && status.message().find("cellar-frozen-shard") != std::string::npos && conn &&
      !conn->broken()) {
    // A shard is frozen on this host while it moves and after it moved
    // (cells/shard_move.h): its units go to the shard's new host once the
    // placement names it, or fail Unavailable while the move finishes; the
    // others are committed without them.
    std::map<uint32_t, std::string> frozen;
    auto rows = conn->Query("SELECT shard, to_host FROM " +
                            QualifiedTable(options_.database, "frozen_shards"));
    conn->Rollback();
    if (rows.ok())
      for (const auto& r : *rows) frozen[static_cast<uint32_t>(r.Uint(0))] = r.Bytes(1);
    std::vector<WriteUnit*> rest;
    size_t rerouted = 0;
    for (WriteUnit* u : units) {
      auto it = frozen.find(u->shard);
      if (it == frozen.end()) {
        rest.push_back(u);
        continue;
      }
      if (options_.reroute && options_.reroute(u)) {
        ++rerouted;
        continue;
      }
      answers.emplace_back(u, Unavailable("shard " + std::to_string(u->shard) +
                                          " is frozen while it moves to host " + it->second +
                                          "; retry in a moment"));
    }
    if (rerouted > 0 && rest.size() + rerouted == units.size() && answers.empty()) {
      if (!rest.empty()) Commit(writer, rest);
      return;
    }
    if (!frozen.empty() && rest.size() < units.size()) {
      Answer(std::move(answers));
      if (probe_) probe_->answering().Observe(SecondsSince(committed, Clock::now()));
      if (!rest.empty()) Commit(writer, rest);
      return;
    }
  }
  for (WriteUnit* u : units) {
    Status mine =
        status.ok()
            ? status
            : Status(status.code(), "shard " + std::to_string(u->shard) + ": " + status.message());
    answers.emplace_back(u, std::move(mine));
  }
  Answer(std::move(answers));
  if (probe_) probe_->answering().Observe(SecondsSince(committed, Clock::now()));
}

void GroupCommitter::Answer(std::vector<std::pair<WriteUnit*, Status>> answers) {
  bool was_empty;
  {
    MutexLock lock(&answer_mu_);
    was_empty = answers_.empty();
    if (was_empty) {
      answers_ = std::move(answers);
    } else {
      for (auto& a : answers) answers_.push_back(std::move(a));
    }
  }
  if (was_empty) answer_cv_.NotifyOne();  // it waits only on an empty list
}

void GroupCommitter::AnswerLoop() {
  std::vector<std::pair<WriteUnit*, Status>> mine;
  while (true) {
    {
      MutexLock lock(&answer_mu_);
      while (answers_.empty() && !answer_stop_) answer_cv_.Wait(&answer_mu_);
      if (answers_.empty()) return;  // stopping, nothing left
      mine.swap(answers_);
    }
    {
      OpenAfterAnswers wake_once_per_gate;
      for (auto& [u, st] : mine) Finish(u, st);
    }
    mine.clear();
  }
}

bool GroupCommitter::Stopping() {
  MutexLock lock(&mu_);
  return stopping_;
}

Status GroupCommitter::Reconnect(WriterConnection& writer) {
  writer.conn.reset();
  const HostTopology topology = topology_->Current(host_);
  auto c = MysqlConnection::Connect(topology_->PrimaryEndpoint(host_));
  if (!c.ok())
    return c.status().code() == StatusCode::kUnavailable ? c.status()
                                                         : Unavailable(c.status().message());
  Status st = topology_->PrimaryCheck(host_)(**c);
  // Autocommit stays on: most group transactions are one INSERT.
  if (st.ok()) st = RegisterWriter(**c, options_.database);
  if (!st.ok()) return st.code() == StatusCode::kInternal ? st : Unavailable(st.message());
  writer.conn = std::move(c).value();
  writer.epoch = topology.epoch;
  return Status::Ok();
}

Status GroupCommitter::CommitWithRetries(WriterConnection& writer,
                                         std::vector<DatastoreBatch>& batches) {
  Status status;
  const MicrosSinceEpoch hold_until = NowMicros() + options_.hold_writes_ms * 1000;
  int aborts = 0;
  bool held = false;
  while (true) {
    bool fresh = false;
    if (!writer.conn || writer.conn->broken() || writer.epoch != topology_->Current(host_).epoch) {
      fresh = true;
      status = Reconnect(writer);
      if (!status.ok() && status.code() != StatusCode::kUnavailable) break;  // no `cellar init`
    }
    if (writer.conn) {
      status = RunGroupTransaction(*writer.conn, options_.database, batches);
      if (status.ok()) break;
      if (status.code() == StatusCode::kAborted && ++aborts <= kDeadlockRetries) continue;
      // The fence row is gone: a failover demoted this server (or the fence
      // table was recreated). Reconnect, which verifies the primary again.
      if (status.code() == StatusCode::kFailedPrecondition) {
        writer.conn.reset();
        status = Unavailable(status.message());
        fresh = false;
      }
      if (status.code() != StatusCode::kUnavailable) break;
      // A pooled connection may have gone stale (server restarted): retry at
      // once on a fresh one. If the lost COMMIT did happen, the retry finds
      // the identical cells and succeeds (writes are idempotent by address).
      if (!fresh) continue;
    }
    // No verified primary: hold the transaction until the topology names a
    // new one (a failover) or the primary answers again, up to hold_writes.
    if (NowMicros() >= hold_until || Stopping()) break;
    if (!held && probe_) probe_->held().Increment();
    held = true;
    topology_->WaitForNewer(host_, writer.epoch,
                            std::min<MicrosSinceEpoch>(hold_until, NowMicros() + 200000));
    writer.conn.reset();
  }
  // A moved shard's refusal is no failure: Commit reroutes or answers it.
  if (!status.ok() && status.message().find("cellar-frozen-shard") == std::string::npos) {
    size_t units = 0;
    for (const auto& b : batches) units += b.units.size();
    LogWarn("group_commit", "batch failed",
            {{"database", options_.database},
             {"units", std::to_string(units)},
             {"held", held ? "true" : "false"},
             {"error", status.ToString()}});
  }
  return status;
}

}  // namespace cellar::internal
