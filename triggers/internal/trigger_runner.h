// TriggerRunner: one named trigger: its consumer group, its keyed handler
// pool, offset tracking, retries, dead letters and pause (see trigger_worker.h).
#pragma once

#include <librdkafka/rdkafkacpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "changelog/change_log_consumer.h"
#include "triggers/dead_letter.h"
#include "changelog/keyed_executor.h"
#include "changelog/partition_offsets.h"
#include "triggers/trigger_worker.h"

namespace cellar::internal {

struct TriggerSpec {
  std::string name;
  std::string datastore;
  std::string column;
  TriggerHandler handler;
  TriggerOptions options;
};

class TriggerRunner : public RdKafka::RebalanceCb {
 public:
  TriggerRunner(TriggerSpec spec, const ClusterConfig& config, CellStore* store,
                KafkaRecordWriter* writer, MetricsRegistry* metrics, std::string client_id);
  ~TriggerRunner() override;

  // Starts consuming the change log. Replay() works without it.
  Status Start();
  void Stop(int drain_timeout_ms);
  Status Replay(const ReplayFrom& from);
  TriggerStatus status() const;
  const TriggerSpec& spec() const { return spec_; }

  void rebalance_cb(RdKafka::KafkaConsumer* consumer, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override;

 private:
  struct Work {
    CellEvent event;
    std::string source_topic;
    int32_t source_partition = -1;
    int64_t source_offset = -1;
    std::string partition_label;    // metrics label: partition number or "replay"
    std::function<void()> on_done;  // handled or set aside (not called when abandoned)
  };
  using TopicPartitionKey = std::pair<std::string, int32_t>;

  void PollLoop();
  void Dispatch(const ConsumedRecord& rec);
  void Process(Work& w);
  // Returns false when the worker is stopping and the event was abandoned.
  bool SetAside(Work& w, const Status& error, int attempts);
  bool SleepUnlessStopping(int ms);
  void CommitDone(bool force);
  void MarkDone(const TopicPartitionKey& tp, int64_t offset);
  Counter& PartitionCounter(const char* name, const char* help, const std::string& partition);

  const TriggerSpec spec_;
  const ClusterConfig& config_;
  CellStore* store_;
  KafkaRecordWriter* writer_;
  MetricsRegistry* metrics_;
  const std::string client_id_;
  const std::string cells_topic_, dlq_topic_, retry_topic_;

  std::unique_ptr<KeyedExecutor> executor_;
  std::unique_ptr<ChangeLogConsumer> consumer_;
  std::thread poll_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stop_polling_{false};
  std::atomic<bool> paused_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  int drain_timeout_ms_ = 30000;  // guarded by stop_mu_

  mutable std::mutex offsets_mu_;
  std::map<TopicPartitionKey, PartitionOffsets> offsets_;
  std::map<TopicPartitionKey, int64_t> committed_;  // last committed "next offset"
  std::map<TopicPartitionKey, int64_t> lag_;

  std::mutex dead_mu_;
  std::deque<MicrosSinceEpoch> recent_dead_;  // set-aside times within the window
  std::set<std::string> blocked_rows_;        // LaterEventsPolicy::kSetAside
};

}  // namespace cellar::internal
