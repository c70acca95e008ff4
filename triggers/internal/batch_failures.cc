#include "triggers/internal/batch_failures.h"

#include <algorithm>
#include <map>

namespace cellar::internal {

BatchRetry SplitReportedFailures(const std::vector<std::string>& rows,
                                 std::vector<std::pair<size_t, Status>> failures) {
  BatchRetry r;
  std::map<std::string, size_t> first_failed;  // row -> index of its first failure
  std::vector<Status> why(rows.size());
  for (auto& [index, status] : failures) {
    auto [it, added] = first_failed.try_emplace(rows[index], index);
    if (!added) it->second = std::min(it->second, index);
    why[index] =
        status.ok() ? Unavailable("the batch handler reported it failed") : std::move(status);
    r.retryable = r.retryable || why[index].code() != StatusCode::kFailedPrecondition;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    auto it = first_failed.find(rows[i]);
    if (it == first_failed.end() || i < it->second) {
      r.done.push_back(i);
      continue;
    }
    if (why[i].ok())
      why[i] = FailedPrecondition("an earlier event of row " + it->first +
                                  " in its batch failed: " + why[it->second].ToString());
    r.again.push_back(i);
    r.why.push_back(why[i]);  // copied: a later follower names its row's failure
  }
  return r;
}

}  // namespace cellar::internal
