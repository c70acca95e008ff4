// Warming a fresh private broker before a benchmark measures it. A broker
// users run has been up for days; a JVM started seconds ago spends its first
// minutes compiling (the C2 compiler thread took about half a core through a
// 30 s pipeline step on 2 cores), which a benchmark would count against the
// broker and the stages that wait for it. WarmUpBroker runs the requests the
// benchmarks send (transactional and idempotent produce, read_committed
// fetches, offset commits, transaction markers) on a topic of its own until
// the compiler threads settle or the time is up.
// Threading: one call at a time; starts and joins its own consumer thread.
#pragma once

#include <string>

#include "base/status.h"

namespace cellar::bench {

struct BrokerWarmUp {
  double seconds = 0;
  long transactions = 0;      // committed by the transactional producer
  long records = 0;           // produced, both producers
  long consumed = 0;          // read by the read_committed group consumer
  double compiler_cpu_s = 0;  // the JVM's compiler threads during the warm-up
};

// CPU seconds the JIT compiler threads ("C1/C2 CompilerThre...") of JVM
// process `pid` have used so far.
double JvmCompilerCpuSeconds(long pid);

// Produces and consumes on `topic` (created by the caller with `partitions`
// partitions) of the broker at `bootstrap` for at least min_seconds and at
// most max_seconds, ending early once the JVM's compiler threads (process
// `jvm_pid`) used under 5% of a core over the last 5 s. Unavailable when a
// client cannot start or a transaction fails.
Result<BrokerWarmUp> WarmUpBroker(const std::string& bootstrap, const std::string& topic,
                                  int partitions, long jvm_pid, double min_seconds,
                                  double max_seconds);

}  // namespace cellar::bench
