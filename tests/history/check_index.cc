#include <set>
#include <thread>

#include "indexes/index_query.h"
#include "tests/history/checks.h"
#include "tests/history/stack.h"
#include "tests/index_model.h"

namespace cellar::history {

void CheckIndex(CellStore& store, const IndexDefinition& def, std::chrono::seconds timeout,
                const std::function<bool()>& give_up, const std::string& check,
                Violations& violations) {
  // Every value the shard field ever had: a driver whose trips moved away must answer nothing.
  std::set<std::string> drivers;
  auto cells = StoredCells(store, def.datastore);
  if (!cells.ok()) {
    violations.Add(check, "cannot read the cells: " + cells.status().ToString());
    return;
  }
  for (const Cell& c : *cells)
    if (c.column == "BASE" && c.body.is_object() && c.body.contains("driver_partner_uuid"))
      drivers.insert(c.body["driver_partner_uuid"].get<std::string>());

  IndexReader reader(&store, {def});
  std::map<std::string, std::string> diffs;  // driver -> difference
  auto compare = [&] {
    diffs.clear();
    const idxtest::Model model(def, idxtest::LatestCells(store, def.datastore));
    for (const std::string& driver : drivers) {
      IndexQuery q;
      q.index = def.table;
      q.shard_value = driver;
      q.limit = 1000;
      std::string diff = idxtest::Diff(model.Answer(q), idxtest::QueryAll(reader, q));
      if (!diff.empty()) diffs[driver] = diff;
    }
    return diffs.empty();
  };
  // Until the index worker caught up after the last fault.
  const auto deadline =
      std::chrono::steady_clock::now() + timeout + std::chrono::seconds(cells->size() / 1000);
  while (!compare() && std::chrono::steady_clock::now() < deadline && !give_up())
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // polling interval
  for (const auto& [driver, diff] : diffs) violations.Add(check, "driver " + driver + ": " + diff);
}

}  // namespace cellar::history
