#include <map>
#include <optional>
#include <thread>

#include "tests/history/checks.h"
#include "tests/history/stack.h"

namespace cellar::history {
namespace {

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

bool WaitForTrigger(Stack& stack, std::chrono::seconds timeout) {
  // Counted in SQL, not by reading every cell: a soak holds millions.
  static const std::string kUnbilled =
      "SELECT COUNT(*) FROM {cells} b WHERE b.column_name = 'BASE' AND b.tombstone = 0 AND "
      "NOT EXISTS (SELECT 1 FROM {cells} s WHERE s.row_key = b.row_key AND "
      "s.column_name = 'STATUS' AND s.ref_key = b.ref_key)";
  const auto deadline = std::chrono::steady_clock::now() + stack.AllowingForHistory(timeout);
  while (true) {
    if (stack.CountOnHosts(kUnbilled) == std::optional<uint64_t>(0)) return true;
    // Records it will never read: waiting longer cannot help.
    if (stack.LostRecords(Component::kTrigger) > 0) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // polling interval
  }
}

void CheckTrigger(CellStore& store, const std::string& check, Violations& violations) {
  Result<std::vector<Cell>> cells = StoredCells(store, kDatastore);
  if (!cells.ok()) {
    violations.Add(check, "cannot read the cells: " + cells.status().ToString());
    return;
  }
  const Split s = SplitCells(*cells);
  for (const auto& [a, source] : s.sources) {
    auto e = s.effects.find(a);
    if (e == s.effects.end()) {
      violations.Add(check, "BASE " + Describe(a) + " was never billed (no STATUS at its ref_key)");
      continue;
    }
    if (e->second.size() != 1)
      violations.Add(check, "BASE " + Describe(a) + " has " + std::to_string(e->second.size()) +
                                " STATUS cells at its ref_key");
    const nlohmann::json want = Billed(source->body, a.second);
    if (e->second.front()->tombstone || e->second.front()->body != want)
      violations.Add(check, "STATUS " + Describe(a) + " is " + e->second.front()->body.dump() +
                                ", billing derives " + want.dump());
  }
  for (const auto& [a, effect] : s.effects)
    if (!s.sources.count(a))
      violations.Add(check, "STATUS " + Describe(a) + " has no live BASE cell as its source");
}

}  // namespace cellar::history
