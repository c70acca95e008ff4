// The checks of a history run, each over what the workload recorded and what
// the system holds once the workload and the faults ended. Every failure is
// added to `violations` under the check's name.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "cells/cell_store.h"
#include "client/cellar_client.h"
#include "indexes/index_definition.h"
#include "tests/history/history.h"
#include "tests/history/violations.h"

namespace cellar::history {

class Stack;  // tests/history/stack.h

// Every cell of `datastore`, read from every shard's log (tombstones included).
Result<std::vector<Cell>> StoredCells(CellStore& store, const std::string& datastore);

// Every acknowledged write is stored, with its body; no version the workload
// did not write is stored, and none twice; each acknowledged erase left one
// tombstone. `stored`: StoredCells() of the trips datastore. (check_rows.cc)
void CheckRows(const History& history, const std::vector<Cell>& stored, Violations& violations);
// The same for `sample` rows (chosen by `seed`) as the worker nodes' versions()
// answers them: acknowledged writes are readable. (check_rows.cc)
void CheckRowsThroughNodes(Client& client, const History& history, size_t sample, uint64_t seed,
                           Violations& violations);

// Waits until every live BASE cell has its STATUS cell (counted in SQL on the
// hosts), at most `timeout` plus 1 s per 1,000 stored cells. Returns false at
// the deadline, or as soon as the trigger's group reported records lost to
// the broker's retention (it will not read them). (check_trigger.cc)
bool WaitForTrigger(Stack& stack, std::chrono::seconds timeout);
// The billing trigger (BASE at ref_key K -> STATUS at K) had exactly one
// effect per live BASE cell, with the body billing derives from it, and none
// without a source; failures are added under `check`. Does not wait.
// (check_trigger.cc)
void CheckTrigger(CellStore& store, const std::string& check, Violations& violations);

// What the change-log check could not judge.
struct ChangeLogCoverage {
  // Missing cells older than a partition's retention cut: the local broker
  // keeps at most 5 MiB per partition and drops the oldest records beyond
  // that (testing_test: KafkaBrokerTest), so these are not violations.
  size_t cut_by_retention = 0;
  uint64_t max_partition_bytes = 0;  // keys and values of the largest partition read
};

// The change log as a plain Kafka client reads it holds every stored cell
// exactly once, per row in commit (added_id) order on one partition, keyed by
// row_key; the workload's BASE column (written in ref_key order) arrives in
// ref_key order. Waits up to `timeout` for the relay to publish every stored
// cell. `stream_of_shard` names the host stream a shard's cells travel in:
// within a partition each stream's records are in added_id order, so where
// retention cut a partition, a stream's missing cells below its oldest record
// there are counted in the coverage instead. (check_change_log.cc)
ChangeLogCoverage CheckChangeLog(const std::string& brokers, const std::string& topic,
                                 int partitions, const std::vector<Cell>& stored,
                                 const std::function<size_t(uint32_t)>& stream_of_shard,
                                 std::chrono::seconds timeout, Violations& violations);

// The index worker's applied positions (indexes/index_positions.h: what an
// index query given a put's position token waits for) reach the last stored
// added_id of every shard of `stored`: after every fault, a put's token would
// be honoured. Waits up to `timeout` (the caller allows for the history:
// Stack::AllowingForHistory), and no longer once `give_up()` is true (then
// adds nothing); at the deadline adds the shards still behind under `check`.
// (check_index.cc)
void CheckIndexPositions(CellStore& store, const IndexDefinition& def,
                         const std::vector<Cell>& stored, std::chrono::seconds timeout,
                         const std::function<bool()>& give_up, const std::string& check,
                         Violations& violations);

// Every query of index `def` (per shard-field value ever written, newest
// first, every page) answers what a brute-force model of the latest cells
// answers (tests/index_model.h); failures are added under `check`. Waits up
// to `timeout` (the caller allows for the history: Stack::AllowingForHistory)
// for the index worker to catch up, and no longer once `give_up()` is true.
// (check_index.cc)
void CheckIndex(CellStore& store, const IndexDefinition& def, std::chrono::seconds timeout,
                const std::function<bool()>& give_up, const std::string& check,
                Violations& violations);

}  // namespace cellar::history
