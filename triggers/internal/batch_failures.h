// What a batch call that succeeded with some events reported failed
// (TriggerContext::ReportFailure) leaves to do. A failed event goes again
// with every later event of its row in the call: a row's later event must
// not be handled before an earlier one that failed. The other events are done.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace cellar::internal {

struct BatchRetry {
  std::vector<size_t> done;   // indexes of the events finished, in order
  std::vector<size_t> again;  // indexes of the events to call again, in order
  std::vector<Status> why;    // per `again` entry: its failure, or its row's for a follower
  bool retryable = false;     // some failure is not FailedPrecondition (set aside at once)
};

// `rows[i]` is event i's row key; `failures` are (index, why) as reported,
// indexes < rows.size(). An OK `why` becomes Unavailable. Pure function.
BatchRetry SplitReportedFailures(const std::vector<std::string>& rows,
                                 std::vector<std::pair<size_t, Status>> failures);

}  // namespace cellar::internal
