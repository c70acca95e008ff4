// HostStream: the relay's in-memory state for one (host, datastore), i.e. one
// host log: what was read and handed to the producer, what Kafka acknowledged,
// and what is saved as the checkpoint. Shared between the relay's host thread (reads,
// produces), the checkpoint thread (saves) and the producer's delivery callbacks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "changelog/internal/stream_claim.h"
#include "changelog/kafka/internal/published_tail.h"
#include "changelog/kafka/kafka_producer.h"

namespace cellar::internal {

struct HostStream {
  size_t host = 0;        // index into mysql.hosts
  std::string host_name;  // for logs
  std::string datastore;
  std::string database;  // the host database (checkpoint table, lock name)
  std::string topic;
  std::string lock_name;  // RelayLockName(database, datastore)

  // Exactly-once mode (stream_claim.h); touched by the host thread only.
  bool exactly_once = false;
  uint64_t epoch = 0;                               // this relay's claim
  ScanOffsets scan_offsets;                         // committed with the position
  std::map<int32_t, PartitionTail> published_tail;  // partition -> what Kafka already holds
  bool needs_reconcile = false;                     // read published_tail before the next batch
  bool fenced = false;                              // another relay claimed the stream
  // The stream's transactional producers (RelayTransactionalIds), opened and
  // closed together: empty until opened, or after a fatal error until
  // reopened. Batches take turns (next_producer), so one producer's commit
  // markers are written while the other's batch runs.
  std::vector<std::unique_ptr<KafkaProducer>> txn_producers;
  size_t next_producer = 0;

  // Polling, per stream (host thread only): an idle stream backs off from
  // relay.poll_min_ms to poll_max_ms on its own, so a busy stream of the same
  // host does not make the relay read every idle one as often.
  int idle_ms = 0;                                    // 0: poll_min_ms
  std::chrono::steady_clock::time_point next_read{};  // read the log again from here on
  std::chrono::steady_clock::time_point last_read{};  // the previous read's start ({}: none)

  Mutex mu;                                  // guards everything below
  CondVar delivered;                         // signalled when `inflight` empties or a batch fails
  uint64_t read_pos GUARDED_BY(mu) = 0;      // highest added_id handed to the producer
  uint64_t acked GUARDED_BY(mu) = 0;         // every added_id <= acked is acknowledged
  int64_t acked_offset GUARDED_BY(mu) = -1;  // Kafka offset of the record of `acked`
  int32_t acked_partition GUARDED_BY(mu) = -1;  // and its partition
  uint64_t saved GUARDED_BY(mu) = 0;            // checkpoint stored in MySQL
  uint64_t generation GUARDED_BY(mu) = 0;  // bumped on rewind; stale delivery reports are ignored
  bool failed GUARDED_BY(mu) = false;      // a delivery failed: rewind to `acked`
  struct InFlight {
    uint64_t added_id;
    bool done;
    int64_t offset;
    int32_t partition;
  };
  std::deque<InFlight> inflight GUARDED_BY(mu);  // in increasing added_id order
  // partition -> highest acknowledged offset
  std::map<int32_t, int64_t> batch_offsets GUARDED_BY(mu);

  // Delivery report for (generation, added_id). Returns true if it advanced `acked`.
  bool OnDelivered(uint64_t gen, uint64_t added_id, int64_t offset) {
    MutexLock lock(&mu);
    if (gen != generation) return false;
    // `inflight` is in added_id order (records are produced in log order), so
    // the record is found by binary search, not by a scan of up to
    // kMaxInFlightPerStream entries per delivery report.
    auto it = std::lower_bound(inflight.begin(), inflight.end(), added_id,
                               [](const InFlight& f, uint64_t id) { return f.added_id < id; });
    if (it != inflight.end() && it->added_id == added_id) {
      it->done = true;
      it->offset = offset;
    }
    bool advanced = false;
    while (!inflight.empty() && inflight.front().done) {
      acked = inflight.front().added_id;
      acked_offset = inflight.front().offset;
      acked_partition = inflight.front().partition;
      int64_t& end = batch_offsets[acked_partition];
      end = std::max(end, acked_offset);
      inflight.pop_front();
      advanced = true;
    }
    // The batch's waiter (PumpFenced) waits for an empty `inflight`: waking
    // it on every report only sent it back to sleep.
    if (advanced && inflight.empty()) delivered.NotifyAll();
    return advanced;
  }
  void OnFailed(uint64_t gen) {
    MutexLock lock(&mu);
    if (gen == generation) failed = true;
    delivered.NotifyAll();
  }
  // Forgets everything not acknowledged; the next read starts after `acked`.
  void Rewind() {
    MutexLock lock(&mu);
    ++generation;
    inflight.clear();
    read_pos = acked;
    failed = false;
    delivered.NotifyAll();
  }
};

// What the producer carries per record (msg_opaque), freed in the delivery callback.
struct DeliveryTag {
  std::shared_ptr<HostStream> stream;
  uint64_t generation;
  uint64_t added_id;
};

}  // namespace cellar::internal
