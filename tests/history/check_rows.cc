#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "tests/history/checks.h"
#include "tests/history/stack.h"
#include "tests/history/workload_thread.h"

namespace cellar::history {
namespace {

constexpr const char* kReadable = "acknowledged writes readable";
constexpr const char* kOnce = "no write twice, none unwritten";
constexpr const char* kTombstone = "one tombstone per erase";

std::string Version(const Uuid& row, int64_t ref) {
  return "row " + row.ToString() + " ref_key " + std::to_string(ref);
}

// One row's stored BASE versions against what the workload wrote.
void CompareRow(const RowHistory& r, const std::vector<const Cell*>& versions,
                Violations& violations) {
  std::map<int64_t, const Cell*> stored;
  for (const Cell* c : versions) {
    if (!stored.emplace(c->ref_key, c).second)
      violations.Add(kOnce, Version(r.row, c->ref_key) + " stored twice");
  }
  std::map<int64_t, const WrittenVersion*> written;
  for (const WrittenVersion& v : r.versions) written[v.ref_key] = &v;
  for (const auto& [ref, cell] : stored) {
    auto w = written.find(ref);
    if (w == written.end()) {
      violations.Add(cell->tombstone ? kTombstone : kOnce,
                     Version(r.row, ref) +
                         (cell->tombstone ? " is a tombstone" : " holds " + cell->body.dump()) +
                         " that no operation wrote");
      continue;
    }
    const WrittenVersion& v = *w->second;
    if (v.tombstone != cell->tombstone || (!v.tombstone && v.body != cell->body))
      violations.Add(v.acknowledged ? kReadable : kOnce,
                     Version(r.row, ref) + " holds " +
                         (cell->tombstone ? "a tombstone" : cell->body.dump()) + ", written " +
                         (v.tombstone ? "a tombstone" : v.body.dump()));
  }
  for (const auto& [ref, v] : written) {
    if (v->acknowledged && !stored.count(ref))
      violations.Add(v->tombstone ? kTombstone : kReadable,
                     "acknowledged " + std::string(v->tombstone ? "erase" : "put") + " of " +
                         Version(r.row, ref) + " is not stored");
  }
}

}  // namespace

void CheckRows(const History& history, const std::vector<Cell>& stored, Violations& violations) {
  std::map<Uuid, std::vector<const Cell*>> base;
  for (const Cell& c : stored)
    if (c.column == "BASE") base[c.row_key].push_back(&c);
  std::set<Uuid> written;
  for (const RowHistory& r : history.rows) {
    written.insert(r.row);
    CompareRow(r, base[r.row], violations);
  }
  for (const auto& [row, cells] : base)
    if (!written.count(row))
      violations.Add(kOnce, "row " + row.ToString() + " is stored but was never written");
}

void CheckRowsThroughNodes(Client& client, const History& history, size_t sample, uint64_t seed,
                           Violations& violations) {
  std::vector<const RowHistory*> rows;
  for (const RowHistory& r : history.rows) rows.push_back(&r);
  std::shuffle(rows.begin(), rows.end(), std::mt19937_64(seed));
  if (rows.size() > sample) rows.resize(sample);
  for (const RowHistory* r : rows) {
    VersionQuery q;
    q.limit = 10000;
    Result<std::vector<Cell>> got = client.Versions(kDatastore, r->row, "BASE", q);
    for (int attempt = 0; attempt < 20 && !got.ok() && UnknownOutcome(got.status()); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // client retry back-off
      got = client.Versions(kDatastore, r->row, "BASE", q);
    }
    if (!got.ok()) {
      violations.Add(kReadable,
                     "versions() of row " + r->row.ToString() + ": " + got.status().ToString());
      continue;
    }
    std::vector<const Cell*> versions;
    for (const Cell& c : *got) versions.push_back(&c);
    CompareRow(*r, versions, violations);
  }
}

}  // namespace cellar::history
