#include <thread>

#include "tests/history/checks.h"

namespace cellar::history {

Result<std::vector<Cell>> StoredCells(CellStore& store, const std::string& datastore) {
  std::vector<Cell> out;
  for (uint32_t s = 0; s < store.config().shards; ++s) {
    uint64_t after = 0;
    while (true) {
      auto page = store.ShardLog(datastore, s, after, 5000);
      if (!page.ok()) return page.status();
      if (page->cells.empty()) {
        // Empty is also the answer while a writer of the host stays open past
        // the read's wait: the end only when nothing committed lies beyond.
        auto head = store.ShardHead(datastore, s);
        if (!head.ok()) return head.status();
        if (*head <= after) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      for (Cell& c : page->cells) out.push_back(std::move(c));
      after = page->next_after;
    }
  }
  return out;
}

}  // namespace cellar::history
