#include "cells/internal/group_commit_probe.h"

#include <vector>

namespace cellar::internal {
namespace {

// 20 us .. 30 s: a group transaction's phases are sub-millisecond, finer than
// LatencyBuckets().
std::vector<double> WriterPhaseBuckets() {
  return {0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
          0.05,    0.1,     0.25,   0.5,    1,      2.5,   5,     10,    30};
}

Histogram& WriterSeconds(MetricsRegistry* r, const std::string& host, const std::string& phase) {
  return r->GetHistogram("cellar_group_commit_writer_seconds",
                         "Group-commit writer thread time per transaction, by phase: waiting "
                         "for cells, committing the transaction, handing the answers on",
                         {{"host", host}, {"phase", phase}}, WriterPhaseBuckets());
}

}  // namespace

GroupCommitProbe::GroupCommitProbe(MetricsRegistry* r, const std::string& host)
    : transactions_(r->GetCounter("cellar_group_commit_transactions_total",
                                  "Group-commit transactions committed", {{"host", host}})),
      failed_(r->GetCounter("cellar_group_commit_failed_transactions_total",
                            "Group-commit transactions that failed after their retries",
                            {{"host", host}})),
      cells_(r->GetCounter("cellar_group_commit_cells_total",
                           "Cells answered by committed group-commit transactions",
                           {{"host", host}})),
      held_(r->GetCounter("cellar_group_commit_held_transactions_total",
                          "Group-commit transactions held because the host had no reachable, "
                          "verified primary (a failover under way)",
                          {{"host", host}})),
      queued_cells_(r->GetGauge("cellar_group_commit_queued_cells",
                                "Cells waiting for a group-commit writer", {{"host", host}})),
      waiting_(WriterSeconds(r, host, "waiting")),
      committing_(WriterSeconds(r, host, "committing")),
      answering_(WriterSeconds(r, host, "answering")) {}

}  // namespace cellar::internal
