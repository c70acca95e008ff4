// The change-log check reads what the broker holds at the end. The local
// broker keeps records in memory, so a broker restart loses everything and the
// relay republishes every host log from the start (docs/design.md, The relay); what
// is checked is the final broker: after the workload and the faults ended and
// the pipeline settled, each stored cell is on the topic exactly once, unless
// the broker's retention deleted it (checks.h, ChangeLogCoverage).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "testing/plain_topic_reader.h"
#include "tests/history/checks.h"

namespace cellar::history {
namespace {

using ::cellar::testing::ReadTopic;
using ::cellar::testing::TopicContents;
using ::cellar::testing::TopicRecord;

constexpr const char* kOnce = "change log: every stored cell exactly once";
constexpr const char* kOrder = "change log: per row in ref_key order";
constexpr const char* kWorkloadColumn = "BASE";  // the column the workload writes
constexpr const char* kKey = "change log: key = row_key";
constexpr const char* kEvent = "change log: event = stored cell";

using Address = std::tuple<std::string, std::string, int64_t>;  // (row, column, ref_key)

std::string Describe(const Address& a) {
  return std::get<0>(a) + "/" + std::get<1>(a) + "/" + std::to_string(std::get<2>(a));
}

struct Event {
  TopicRecord record;
  nlohmann::json value;
  Address address;
};

// Parsed events; unparsable records are violations.
std::vector<Event> Parse(const std::vector<TopicRecord>& records, Violations* violations) {
  std::vector<Event> out;
  for (const TopicRecord& r : records) {
    Event e{r, nlohmann::json::parse(r.value, nullptr, false), {}};
    const auto& v = e.value;
    if (!v.is_object() || !v.contains("row_key") || !v["row_key"].is_string() ||
        !v.contains("column") || !v.contains("ref_key") || !v["ref_key"].is_number_integer()) {
      if (violations)
        violations->Add(kEvent, "partition " + std::to_string(r.partition) + " offset " +
                                    std::to_string(r.offset) + ": not a cell event: " + r.value);
      continue;
    }
    e.address = {v["row_key"].get<std::string>(), v["column"].get<std::string>(),
                 v["ref_key"].get<int64_t>()};
    out.push_back(std::move(e));
  }
  return out;
}

// Where retention cut the log: (partition, stream) -> the lowest added_id
// still on the partition; a (partition, stream) of a cut partition that has
// no record left maps to UINT64_MAX (all of its records were older).
class RetentionCut {
 public:
  RetentionCut(const TopicContents& topic, const std::vector<Event>& events,
               const std::map<Address, const Cell*>& want,
               const std::function<size_t(uint32_t)>& stream_of_shard)
      : log_start_(topic.log_start), stream_of_shard_(stream_of_shard) {
    for (const Event& e : events) {
      auto cell = want.find(e.address);
      if (cell == want.end()) continue;
      const Cell& c = *cell->second;
      auto [it, added] =
          oldest_.try_emplace({e.record.partition, stream_of_shard(c.shard)}, c.added_id);
      if (!added) it->second = std::min(it->second, c.added_id);
    }
  }

  // True when `c` (in partition `partition`) is older than what retention kept.
  bool Removed(const Cell& c, int32_t partition) const {
    if (partition < 0 || static_cast<size_t>(partition) >= log_start_.size() ||
        log_start_[static_cast<size_t>(partition)] == 0)
      return false;
    auto it = oldest_.find({partition, stream_of_shard_(c.shard)});
    return it == oldest_.end() || c.added_id < it->second;
  }

 private:
  std::vector<int64_t> log_start_;
  std::function<size_t(uint32_t)> stream_of_shard_;
  std::map<std::pair<int32_t, size_t>, uint64_t> oldest_;
};

// Stored cells neither on the topic nor removed by retention.
size_t MissingCount(const TopicContents& topic, const std::map<Address, const Cell*>& want,
                    int partitions, const std::function<size_t(uint32_t)>& stream_of_shard) {
  const std::vector<Event> events = Parse(topic.records, nullptr);
  const RetentionCut cut(topic, events, want, stream_of_shard);
  std::set<Address> seen;
  for (const Event& e : events) seen.insert(e.address);
  size_t missing = 0;
  for (const auto& [a, c] : want)
    missing +=
        seen.count(a) || cut.Removed(*c, static_cast<int32_t>(c->shard % partitions)) ? 0 : 1;
  return missing;
}

}  // namespace

ChangeLogCoverage CheckChangeLog(const std::string& brokers, const std::string& topic,
                                 int partitions, const std::vector<Cell>& stored,
                                 const std::function<size_t(uint32_t)>& stream_of_shard,
                                 std::chrono::seconds timeout, Violations& violations) {
  ChangeLogCoverage coverage;
  std::map<Address, const Cell*> want;
  for (const Cell& c : stored) want[{c.row_key.ToString(), c.column, c.ref_key}] = &c;

  // Until the relay published every stored cell (it catches up after the last
  // fault). Reading takes longer the more there is (a soak: millions of cells).
  const int read_ms = 30000 + static_cast<int>(stored.size() / 10);
  const auto deadline = std::chrono::steady_clock::now() + timeout +
                        std::chrono::milliseconds(static_cast<int64_t>(stored.size()) / 10);
  Result<TopicContents> records = ReadTopic(brokers, topic, partitions, read_ms);
  while (!records.ok() || MissingCount(*records, want, partitions, stream_of_shard) > 0) {
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // polling interval
    records = ReadTopic(brokers, topic, partitions, read_ms);
  }
  if (!records.ok()) {
    violations.Add(kOnce, "cannot read " + topic + ": " + records.status().ToString());
    return coverage;
  }
  const std::vector<Event> events = Parse(records->records, &violations);
  const RetentionCut cut(*records, events, want, stream_of_shard);
  std::map<int32_t, uint64_t> partition_bytes;
  for (const TopicRecord& r : records->records) {
    uint64_t& bytes = partition_bytes[r.partition];
    bytes += r.key.size() + r.value.size();
    coverage.max_partition_bytes = std::max(coverage.max_partition_bytes, bytes);
  }

  std::map<Address, size_t> count;
  // Per row, the last (added_id, ref_key per column) seen, in partition order.
  std::map<std::string, std::pair<int32_t, uint64_t>> row_last;
  std::map<std::pair<std::string, std::string>, int64_t> column_last;
  for (const Event& e : events) {
    const auto& [row, column, ref] = e.address;
    if (++count[e.address] == 2)
      violations.Add(kOnce, Describe(e.address) + " is on the topic more than once");
    if (e.record.key != row)
      violations.Add(kKey, Describe(e.address) + " has key '" + e.record.key + "'");
    auto cell = want.find(e.address);
    if (cell == want.end()) {
      violations.Add(kOnce, Describe(e.address) + " is on the topic but not stored");
      continue;
    }
    const Cell& c = *cell->second;
    const bool tombstone = e.value.value("tombstone", false);
    const nlohmann::json body = e.value.contains("body") ? e.value["body"] : nlohmann::json();
    if (tombstone != c.tombstone || (!c.tombstone && body != c.body) ||
        e.value.value("shard", -1) != static_cast<int>(c.shard) ||
        e.value.value("added_id", uint64_t{0}) != c.added_id ||
        e.record.partition != static_cast<int32_t>(c.shard % partitions))
      violations.Add(kEvent, Describe(e.address) + " event " + e.record.value.substr(0, 400) +
                                 " differs from the stored cell (shard " + std::to_string(c.shard) +
                                 ", added_id " + std::to_string(c.added_id) + ")");
    if (count[e.address] > 1) continue;  // order is judged on first occurrences
    auto last = row_last.find(row);
    if (last != row_last.end() &&
        (last->second.first != e.record.partition || last->second.second >= c.added_id))
      violations.Add(kOrder, Describe(e.address) + " (added_id " + std::to_string(c.added_id) +
                                 ") after added_id " + std::to_string(last->second.second) +
                                 " of its row");
    row_last[row] = {e.record.partition, c.added_id};
    // ref_key order follows from commit order only for a column whose writer
    // writes it in ref_key order: the workload's BASE. STATUS is billing's:
    // an event set aside while a MariaDB host was down (max_attempts spent)
    // lets the row's later events go on (docs/design.md, Triggers: Failures) and is
    // billed when the trigger reads the topic again after a broker restart,
    // so its STATUS commits after higher ref_keys (seed 1367425275 did this).
    if (column != kWorkloadColumn) continue;
    auto col = column_last.find({row, column});
    if (col != column_last.end() && col->second >= ref)
      violations.Add(kOrder, Describe(e.address) + " after ref_key " + std::to_string(col->second) +
                                 " of its column");
    column_last[{row, column}] = ref;
  }
  for (const auto& [a, c] : want) {
    if (count.count(a)) continue;
    if (cut.Removed(*c, static_cast<int32_t>(c->shard % partitions)))
      coverage.cut_by_retention++;
    else
      violations.Add(kOnce, Describe(a) + " (shard " + std::to_string(c->shard) + ", added_id " +
                                std::to_string(c->added_id) + ") is stored but not on the topic");
  }
  return coverage;
}

}  // namespace cellar::history
