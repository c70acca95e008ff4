#include "bench/bench_put_bare_commit.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>

#include "base/time.h"
#include "bench/bench_put_raw.h"

namespace cellar::bench {
namespace {

// One futex word that a batch's callers sleep on together.
using Gate = std::atomic<uint32_t>;

struct Row {
  const RawStatement* statement;  // a one-row fused INSERT ... RETURNING
  size_t host = 0;
  std::shared_ptr<Gate> gate;  // of the batch the row joined
};

struct Batch {
  std::vector<Row*> rows;
  std::shared_ptr<Gate> gate;
};

// One host's queue, writers and (in the variant) answering thread.
class HostCommitter {
 public:
  HostCommitter(const ClusterConfig& cfg, size_t host, bool answering_thread)
      : cfg_(cfg),
        host_(host),
        answering_thread_(answering_thread),
        max_batch_(static_cast<size_t>(std::max(1, cfg.group_commit.max_batch_cells))),
        min_pipelined_(static_cast<size_t>(std::max(0, cfg.group_commit.min_pipelined_cells))) {}

  // Connects and registers the writers; the first error.
  Status Connect() {
    for (int i = 0; i < std::max(1, cfg_.group_commit.writer_threads_per_host); ++i) {
      CELLAR_ASSIGN_OR_RETURN(
          auto conn,
          ConnectRawConnection(cfg_, host_, {.register_writers = true, .keep_autocommit = true}));
      conns_.push_back(std::move(conn));
    }
    return Status::Ok();
  }

  void Start() {
    for (auto& c : conns_) writers_.emplace_back([this, conn = c.get()] { WriterLoop(*conn); });
    if (answering_thread_) answerer_ = std::thread([this] { AnswerLoop(); });
  }

  // Queues `row` and blocks until its batch is committed.
  void Put(Row* row) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      row->gate = forming_;
      queue_.push_back(row);
      wake = in_flight_ == 0 || queue_.size() >= min_pipelined_;
    }
    if (wake) cv_.notify_one();
    row->gate->wait(0, std::memory_order_acquire);
  }

  // After the last Put: commits what is left and joins the threads.
  void Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (auto& t : writers_) t.join();
    {
      std::lock_guard<std::mutex> lock(answer_mu_);
      answer_done_ = true;
    }
    answer_cv_.notify_all();
    if (answerer_.joinable()) answerer_.join();
    for (auto& c : conns_) UnregisterRawWriter(cfg_, host_, *c);
  }

  uint64_t rows() const { return rows_.load(); }
  uint64_t transactions() const { return transactions_.load(); }
  uint64_t errors() const { return errors_.load(); }
  std::string first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  bool MayStart() const {
    return !queue_.empty() && (in_flight_ == 0 || queue_.size() >= min_pipelined_);
  }

  const std::string& SqlFor(size_t rows, const std::string& one_row) {
    if (sql_.size() <= rows) sql_.resize(rows + 1);
    if (sql_[rows].empty()) {
      const size_t returning = one_row.find(" RETURNING");
      std::string sql = one_row.substr(0, returning);
      for (size_t i = 1; i < rows; ++i) sql += ",(?,?,?,?,?,?,?)";
      sql_[rows] = sql + one_row.substr(returning);
    }
    return sql_[rows];
  }

  void WriterLoop(MysqlConnection& conn) {
    std::vector<SqlParamView> params;
    while (true) {
      Batch batch;
      std::string sql;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return MayStart() || (done_ && queue_.empty()); });
        if (queue_.empty()) return;
        while (!queue_.empty() && batch.rows.size() < max_batch_) {
          batch.rows.push_back(queue_.front());
          queue_.pop_front();
        }
        batch.gate = std::move(forming_);
        forming_ = std::make_shared<Gate>(0);
        ++in_flight_;
        sql = SqlFor(batch.rows.size(), batch.rows[0]->statement->sql);
        if (MayStart()) cv_.notify_one();
      }
      const int64_t now = NowMicros();
      params.clear();
      for (const Row* r : batch.rows)
        for (size_t p = 0; p < kRawParamsPerRow; ++p) {
          if (p == kRawCreatedAtParam) {
            params.emplace_back(now);
            continue;
          }
          std::visit([&](const auto& v) { params.emplace_back(SqlParamView(v)); },
                     r->statement->params[p]);
        }
      auto returned = conn.QueryBorrowed(sql, params);
      {
        std::lock_guard<std::mutex> lock(mu_);
        --in_flight_;
        if (!returned.ok() && errors_++ == 0) first_error_ = returned.status().ToString();
      }
      if (returned.ok()) rows_ += returned->size();
      ++transactions_;
      // This writer loops back for what queued meanwhile, as GroupCommitter's do.
      Answer(std::move(batch));
    }
  }

  void Answer(Batch batch) {
    if (!answering_thread_) return Open(*batch.gate);
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(answer_mu_);
      was_empty = answers_.empty();
      answers_.push_back(std::move(batch.gate));
    }
    if (was_empty) answer_cv_.notify_one();
  }

  static void Open(Gate& gate) {
    gate.store(1, std::memory_order_release);
    gate.notify_all();
  }

  void AnswerLoop() {
    std::vector<std::shared_ptr<Gate>> mine;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(answer_mu_);
        answer_cv_.wait(lock, [&] { return !answers_.empty() || answer_done_; });
        if (answers_.empty()) return;
        mine.swap(answers_);
      }
      for (auto& g : mine) Open(*g);
      mine.clear();
    }
  }

  const ClusterConfig& cfg_;
  const size_t host_;
  const bool answering_thread_;
  const size_t max_batch_;
  const size_t min_pipelined_;
  std::vector<std::unique_ptr<MysqlConnection>> conns_;
  std::vector<std::thread> writers_;
  std::vector<std::string> sql_;  // by row count; writers hold mu_

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Row*> queue_;
  std::shared_ptr<Gate> forming_ = std::make_shared<Gate>(0);
  int in_flight_ = 0;
  bool done_ = false;
  std::string first_error_;

  std::atomic<uint64_t> rows_{0}, transactions_{0}, errors_{0};

  std::mutex answer_mu_;
  std::condition_variable answer_cv_;
  std::vector<std::shared_ptr<Gate>> answers_;
  bool answer_done_ = false;
  std::thread answerer_;
};

// `work`'s one-row statements, put by `callers` blocked callers.
PhaseResult RunBareGroupCommit(const ClusterConfig& cfg, RawWork& work, int callers,
                               bool answering_thread, uint64_t* transactions) {
  PhaseResult result;
  std::vector<std::unique_ptr<HostCommitter>> hosts;
  for (size_t h = 0; h < cfg.mysql.hosts.size(); ++h) {
    hosts.push_back(std::make_unique<HostCommitter>(cfg, h, answering_thread));
    if (Status st = hosts.back()->Connect(); !st.ok()) {
      result.errors = 1;
      result.first_error = st.ToString();
      return result;
    }
  }
  // Rows in the plan's random order, interleaved across hosts.
  std::vector<Row> rows;
  for (size_t i = 0, left = 1; left > 0; ++i) {
    left = 0;
    for (size_t h = 0; h < work.size(); ++h)
      if (i < work[h].size()) {
        ++left;
        rows.push_back(Row{&work[h][i].statements[0], h, nullptr});
      }
  }
  for (auto& h : hosts) h->Start();
  std::atomic<size_t> next{0};
  std::latch start(callers + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (size_t i; !StopRequested() && (i = next.fetch_add(1)) < rows.size();)
        hosts[rows[i].host]->Put(&rows[i]);
    });
  start.arrive_and_wait();
  Stopwatch clock;
  for (auto& t : threads) t.join();
  result.seconds = clock.Seconds();
  for (auto& h : hosts) {
    h->Finish();
    result.rows += h->rows();
    *transactions += h->transactions();
    if (h->errors() > 0 && result.errors == 0) result.first_error = h->first_error();
    result.errors += h->errors();
  }
  result.interrupted = StopRequested();
  if (!result.interrupted && result.errors == 0 && result.rows != rows.size()) {
    result.errors = 1;
    result.first_error = "the bare group commit wrote " + std::to_string(result.rows) + " of " +
                         std::to_string(rows.size()) + " rows";
  }
  return result;
}

const char* VariantText(const BareGroupCommit& v) {
  return v.answering_thread ? "an answering thread opens the gate" : "the writer opens the gate";
}

}  // namespace

std::vector<BareGroupCommit> RunBareGroupCommits(const BenchCluster& cluster, int callers,
                                                 int cells, int body_bytes, int rounds,
                                                 std::mt19937_64& rng, int* exit_code) {
  const ClusterConfig& cfg = cluster.config;
  std::vector<BareGroupCommit> out;
  *exit_code = 0;
  for (bool answering_thread : {false, true}) {
    BareGroupCommit v;
    v.answering_thread = answering_thread;
    uint64_t transactions = 0;
    v.rounds = RunPhaseRounds(
        cluster, std::string("phase H (") + VariantText(v) + ")", rounds,
        std::to_string(callers) + " blocked callers",
        [&] {
          return PlanFusedFenceStatements(cfg, cfg.datastores[0].name,
                                          cfg.datastores[0].columns[0].name, cells, 1, body_bytes,
                                          rng);
        },
        [&](RawWork& work) {
          return RunBareGroupCommit(cfg, work, callers, answering_thread, &transactions);
        });
    if (v.rounds.exit_code != 0) {
      *exit_code = v.rounds.exit_code;
      return {};
    }
    v.rows_per_transaction =
        transactions ? static_cast<double>(v.rounds.total.rows) / transactions : 0;
    out.push_back(std::move(v));
  }
  return out;
}

void AddBareGroupCommitRows(Table& t, const std::vector<BareGroupCommit>& variants,
                            double closed_loop_rows_per_s, double store_cells_per_s) {
  if (variants.empty()) return;
  t.Section("phase H: a bare group commit (C blocked callers, the writers' SQL, no Cellar code)");
  for (const BareGroupCommit& v : variants) {
    const double rate = v.rounds.median_rows_per_s;
    const double rows = static_cast<double>(v.rounds.total.rows);
    const double client_us = rows > 0 ? 1e6 * v.rounds.usage.client_cpu_s / rows : 0;
    t.Add(VariantText(v), FormatNumber(rate, 0) + " rows/s, " +
                              FormatNumber(rate / closed_loop_rows_per_s, 3) +
                              " x closed-loop ceiling, " + FormatNumber(v.rows_per_transaction, 1) +
                              " rows/tx, " + FormatNumber(client_us, 1) + " us client CPU per row");
  }
  double best = 0;
  for (const BareGroupCommit& v : variants) best = std::max(best, v.rounds.median_rows_per_s);
  t.Add("single puts (phase B) / the faster bare group commit",
        FormatNumber(best > 0 ? store_cells_per_s / best : 0, 3));
}

nlohmann::json BareGroupCommitJson(const std::vector<BareGroupCommit>& variants,
                                   double closed_loop_rows_per_s, double store_cells_per_s) {
  nlohmann::json j = nlohmann::json::object();
  double best = 0;
  for (const BareGroupCommit& v : variants) {
    const std::string key = v.answering_thread ? "answering_thread" : "writer_answers";
    j[key + "_rows_per_s"] = Round(v.rounds.median_rows_per_s, 1);
    j[key + "_ratio_to_closed_loop_ceiling"] =
        Round(v.rounds.median_rows_per_s / closed_loop_rows_per_s, 3);
    best = std::max(best, v.rounds.median_rows_per_s);
  }
  j["store_ratio_to_bare"] = Round(best > 0 ? store_cells_per_s / best : 0, 3);
  return j;
}

}  // namespace cellar::bench
