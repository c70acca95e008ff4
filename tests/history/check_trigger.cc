#include <map>
#include <thread>

#include "tests/history/checks.h"
#include "tests/history/stack.h"

namespace cellar::history {
namespace {

constexpr const char* kCheck = "one trigger effect per source cell";

using Address = std::pair<Uuid, int64_t>;  // (row, ref_key)

// The STATUS body cellar-billing writes for a BASE body (examples/billing/cellar_billing_main.cc).
nlohmann::json Billed(const nlohmann::json& trip, int64_t ref_key) {
  double total = 0;
  if (trip.contains("fare") && trip["fare"].is_object() && trip["fare"].contains("total") &&
      trip["fare"]["total"].is_number())
    total = trip["fare"]["total"].get<double>();
  return {{"state", total > 0 ? "billed" : "free"},
          {"amount", total},
          {"billed_ref_key", ref_key},
          {"trigger", "billing"}};
}

struct Split {
  std::map<Address, const Cell*> sources;               // live BASE cells
  std::map<Address, std::vector<const Cell*>> effects;  // STATUS cells
  size_t missing = 0;
};

Split SplitCells(const std::vector<Cell>& cells) {
  Split s;
  for (const Cell& c : cells) {
    if (c.column == "BASE" && !c.tombstone) s.sources[{c.row_key, c.ref_key}] = &c;
    if (c.column == "STATUS") s.effects[{c.row_key, c.ref_key}].push_back(&c);
  }
  for (const auto& [a, c] : s.sources) s.missing += s.effects.count(a) ? 0 : 1;
  return s;
}

std::string Describe(const Address& a) {
  return "row " + a.first.ToString() + " ref_key " + std::to_string(a.second);
}

}  // namespace

void CheckTrigger(CellStore& store, std::chrono::seconds timeout, Violations& violations) {
  Result<std::vector<Cell>> cells = StoredCells(store, kDatastore);
  // After a broker restart the trigger handles the whole history again: allow
  // for it (a soak holds millions of cells).
  const auto deadline = std::chrono::steady_clock::now() + timeout +
                        std::chrono::seconds(cells.ok() ? cells->size() / 1000 : 0);
  // Until every source has its effect: the trigger catches up after the last fault.
  while (!cells.ok() || SplitCells(*cells).missing > 0) {
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // polling interval
    cells = StoredCells(store, kDatastore);
  }
  if (!cells.ok()) {
    violations.Add(kCheck, "cannot read the cells: " + cells.status().ToString());
    return;
  }
  const Split s = SplitCells(*cells);
  for (const auto& [a, source] : s.sources) {
    auto e = s.effects.find(a);
    if (e == s.effects.end()) {
      violations.Add(kCheck,
                     "BASE " + Describe(a) + " was never billed (no STATUS at its ref_key)");
      continue;
    }
    if (e->second.size() != 1)
      violations.Add(kCheck, "BASE " + Describe(a) + " has " + std::to_string(e->second.size()) +
                                 " STATUS cells at its ref_key");
    const nlohmann::json want = Billed(source->body, a.second);
    if (e->second.front()->tombstone || e->second.front()->body != want)
      violations.Add(kCheck, "STATUS " + Describe(a) + " is " + e->second.front()->body.dump() +
                                 ", billing derives " + want.dump());
  }
  for (const auto& [a, effect] : s.effects)
    if (!s.sources.count(a))
      violations.Add(kCheck, "STATUS " + Describe(a) + " has no live BASE cell as its source");
}

}  // namespace cellar::history
