#include "tests/history/workload.h"

#include <random>

#include "client/cellar_client.h"
#include "tests/history/workload_thread.h"

namespace cellar::history {
namespace {

std::vector<Uuid> SeededUuids(std::mt19937_64& rng, int n) {
  std::vector<Uuid> out;
  for (int i = 0; i < n; ++i) {
    std::string bytes(16, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() & 0xff);
    out.push_back(Uuid::FromBytes(bytes));
  }
  return out;
}

}  // namespace

Workload::Workload(std::vector<std::string> endpoints, uint64_t seed, int threads,
                   Violations* violations)
    : endpoints_(std::move(endpoints)), seed_(seed), threads_(threads), violations_(violations) {}

Workload::~Workload() { Stop(); }

Status Workload::Start() {
  std::mt19937_64 rng(seed_);
  const std::vector<Uuid> drivers = SeededUuids(rng, 8);
  const std::vector<Uuid> cities = SeededUuids(rng, 3);
  for (int i = 0; i < threads_; ++i) {
    ClientOptions o;
    o.endpoints = endpoints_;
    auto client = Client::Create(o);
    if (!client.ok()) return client.status();
    workers_.push_back(std::make_unique<WorkloadThread>(i, seed_, std::move(*client), drivers,
                                                        cities, violations_));
  }
  for (auto& w : workers_)
    running_.emplace_back([this, w = w.get()] { w->Run(stop_, operations_); });
  return Status::Ok();
}

void Workload::Stop() {
  stop_ = true;
  for (auto& t : running_) t.join();
  running_.clear();
}

History Workload::TakeHistory() {
  History h;
  for (auto& w : workers_) {
    for (auto& r : w->rows()) h.rows.push_back(std::move(r));
    w->rows().clear();
    h.counts.Add(w->counts());
  }
  return h;
}

}  // namespace cellar::history
