#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "indexes/index_positions.h"
#include "indexes/index_query.h"
#include "tests/history/checks.h"
#include "tests/history/stack.h"
#include "tests/index_model.h"

namespace cellar::history {

void CheckIndexPositions(CellStore& store, const IndexDefinition& def,
                         const std::vector<Cell>& stored, std::chrono::seconds timeout,
                         const std::function<bool()>& give_up, const std::string& check,
                         Violations& violations) {
  std::map<uint32_t, uint64_t> last;  // shard -> its last stored added_id
  for (const Cell& c : stored) last[c.shard] = std::max(last[c.shard], c.added_id);
  std::string behind;  // the shards not there yet, as last read
  auto reached = [&] {
    behind.clear();
    for (const auto& [shard, added_id] : last) {
      auto applied = AppliedIndexPosition(&store, def.datastore, shard);
      if (!applied.ok())
        behind += " shard " + std::to_string(shard) + ": " + applied.status().ToString() + ";";
      else if (*applied < added_id)
        behind += " shard " + std::to_string(shard) + " at " + std::to_string(*applied) + " of " +
                  std::to_string(added_id) + ";";
    }
    return behind.empty();
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reached()) {
    if (give_up()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      violations.Add(check, "applied positions behind the stored cells:" + behind);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // polling interval
  }
}

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
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!compare() && std::chrono::steady_clock::now() < deadline && !give_up())
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // polling interval
  for (const auto& [driver, diff] : diffs) violations.Add(check, "driver " + driver + ": " + diff);
}

}  // namespace cellar::history
