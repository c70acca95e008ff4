// The benchmark harness's own login to the private MariaDB. The pipeline's
// visibility probes query the index as a user would (IndexReader), which
// costs the server CPU that is the harness's, not Cellar's. Reading through
// a store of their own that logs in as kHarnessMysqlUser lets a step tell
// that CPU from the stages' (HarnessServerCpu): the server's threads serving
// that user's connections, found by information_schema.PROCESSLIST's TID.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bench/bench_common.h"
#include "cells/cell_store.h"

namespace cellar::bench {

inline constexpr const char* kHarnessMysqlUser = "cellar_harness";

// A CellStore on `cluster` that logs in as kHarnessMysqlUser (made on first
// use, with SELECT rights only: the harness reads). Null when the cluster has
// no private server (--config) or the user cannot be made; *why_not then says
// why (the caller reads through its own store).
std::unique_ptr<CellStore> OpenHarnessStore(const BenchCluster& cluster, std::string* why_not);

// CPU seconds so far of each server thread (by Linux thread id) serving a
// connection of kHarnessMysqlUser now; nullopt without a private server or
// when the process list cannot be read.
using ServerThreadsCpu = std::map<long, double>;
std::optional<ServerThreadsCpu> HarnessServerCpu(const BenchCluster& cluster);

// CPU seconds the threads in both `before` and `after` used between them.
// Connections opened or closed in between are not counted: the server
// reuses a cached thread for a new connection, so a thread's CPU before its
// connection began is unknown. Fill the pool first (FillHarnessPools).
double CpuSince(const ServerThreadsCpu& before, const ServerThreadsCpu& after);

// Opens `connections` connections of every host's pool of `store` at once
// and returns them to it, so that the harness's reads that follow find them
// idle rather than connect (whose threads CpuSince could not count).
// Unavailable when a host cannot be reached.
Status FillHarnessPools(CellStore& store, int connections);

}  // namespace cellar::bench
