#include "bench/bench_relay_baselines.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/log.h"
#include "base/time.h"
#include "base/uuid.h"
#include "bench/bench_broker.h"
#include "bench/bench_common.h"
#include "bench/bench_load.h"
#include "cells/cell_store.h"
#include "cells/mysql_client.h"
#include "changelog/cell_event.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/kafka/kafka_producer.h"
#include "changelog/relay.h"
#include "changelog/relay_checkpoint.h"

namespace cellar::bench::relay_parts {

// The partitions of a baseline topic. With --config the broker may not offer
// CreateTopics (the local broker auto-creates topics with its own default
// partition count): then the baseline spreads its records over the partitions
// the topic has, and says so.
Result<int> BaselinePartitions(KafkaProducer& producer, const std::string& topic, int want) {
  Status s = producer.EnsureTopic(topic, want, 5000);
  if (s.ok()) return want;
  if (s.code() != StatusCode::kFailedPrecondition) return s;
  CELLAR_ASSIGN_OR_RETURN(int have, producer.TopicPartitions(topic, 5000));
  if (have <= 0) return s;
  Progress("baseline topic " + topic + " has " + std::to_string(have) +
           " partitions (auto-created by the broker), not " + std::to_string(want) +
           ": the baseline uses those");
  return have;
}

// ---- Baseline: a bare producer ------------------------------------------------

BaselineResult RunProducerBaseline(const ClusterConfig& cfg, BenchBroker* broker,
                                   const std::string& topic, const std::vector<Payload>& payloads) {
  BaselineResult out;
  if (broker) {
    if (Status s = broker->CreateTopic(topic, cfg.kafka.partitions); !s.ok()) {
      out.error = s.ToString();
      return out;
    }
  }
  // The relay's producer settings (changelog/internal/relay_impl.h).
  ProducerOptions options;
  options.settings = {{"enable.idempotence", "true"},
                      {"acks", "all"},
                      {"linger.ms", "1"},
                      {"message.timeout.ms", "30000"},
                      {"queue.buffering.max.messages", "1000000"},
                      {"allow.auto.create.topics", "false"},
                      {"client.id", "cellar-bench-baseline"}};
  auto created = KafkaProducer::Create(cfg.kafka, std::move(options));
  if (!created.ok()) {
    out.error = created.status().ToString();
    return out;
  }
  KafkaProducer& p = **created;
  int parts = cfg.kafka.partitions;
  if (!broker) {
    auto have = BaselinePartitions(p, topic, cfg.kafka.partitions);
    if (!have.ok()) {
      out.error = have.status().ToString();
      return out;
    }
    parts = *have;
  }
  // Warm-up: connection, metadata and producer id before the clock starts.
  for (int32_t part = 0; part < parts; ++part)
    p.Produce(topic, part, /*key=*/"", "warm-up", /*timestamp_ms=*/0).IgnoreError();
  p.Flush(10000).IgnoreError();
  const uint64_t warm = p.delivered();
  Stopwatch clock;
  size_t i = 0;
  while (i < payloads.size() && !StopRequested()) {
    const Payload& m = payloads[i];
    Status s = p.Produce(topic, m.partition % parts, m.key, m.value, m.timestamp_ms);
    if (s.code() == StatusCode::kResourceExhausted) {  // local queue full
      p.Poll(1);
      continue;
    }
    if (!s.ok()) {
      out.error = s.message();
      break;
    }
    if (++i % 1000 == 0) p.Poll(0);
  }
  while (!StopRequested() && p.Outstanding() > 0) p.Flush(100).IgnoreError();
  out.seconds = clock.Seconds();
  out.acknowledged = p.delivered() - warm;
  out.failed = p.failed();
  return out;
}

// Calls `done` every `step_ms` until it is true (true), the timeout passed or
// a stop was requested (false).
bool WaitUntil(const std::function<bool()>& done, double timeout_s, int step_ms) {
  Stopwatch clock;
  while (!done()) {
    if (StopRequested() || clock.Seconds() > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
  return true;
}

// ---- Where the latency goes ---------------------------------------------------

RelayProbes ProbeRelayWork(CellStore& store, ScratchCheckpoints& scratch,
                           const std::string& datastore, int rounds) {
  RelayProbes out;
  const ClusterConfig& cfg = store.config();
  const MysqlHostConfig& host = cfg.mysql.hosts.front();
  auto lease = store.PoolForHost(0).Acquire();
  if (!lease.ok()) {
    out.error = lease.status().ToString();
    return out;
  }
  MysqlConnection& conn = **lease;
  // The host's streams: one log per datastore.
  std::string heads;
  for (const auto& ds : cfg.datastores) {
    if (!heads.empty()) heads += " UNION ALL ";
    heads += "SELECT " + std::to_string(out.heads_streams++) + ", IFNULL(MAX(added_id), 0) FROM " +
             QualifiedTable(cfg.HostDatabase(host), "cells_" + ds.name);
  }
  std::vector<double> heads_ms, log_ms, save_ms;
  for (int i = 0; i < rounds; ++i) {
    Stopwatch clock;
    if (auto r = conn.Query(heads); !r.ok()) {
      out.error = r.status().ToString();
      return out;
    }
    heads_ms.push_back(clock.Millis());
    auto head = store.HostHead(datastore, 0);
    if (!head.ok()) {
      out.error = head.status().ToString();
      return out;
    }
    clock.Restart();
    auto page = store.HostLog(datastore, 0, *head > 0 ? *head - 1 : 0, cfg.relay.batch_cells);
    if (!page.ok()) {
      out.error = page.status().ToString();
      return out;
    }
    log_ms.push_back(clock.Millis());
    const double save = scratch.TimeSave();
    if (save >= 0) save_ms.push_back(save);
  }
  out.heads_p50_ms = Percentile(heads_ms, 50);
  out.shard_log_p50_ms = Percentile(log_ms, 50);
  out.save_p50_ms = Percentile(save_ms, 50);
  return out;
}

// Mean number of distinct shards written per `window_ms` window: the streams
// a relay round finds dirty, and the checkpoints it saves every 100 ms.
double DirtyShardsPerWindow(const std::vector<PutResult>& puts, int64_t window_ms) {
  std::map<int64_t, std::set<uint32_t>> windows;
  for (const auto& p : puts)
    if (p.created_at > 0) windows[p.created_at / (window_ms * 1000)].insert(p.shard);
  if (windows.size() <= 2) return 0;
  // Leave out the first and last (partial) windows.
  double sum = 0;
  size_t n = 0;
  for (auto it = std::next(windows.begin()); it != std::prev(windows.end()); ++it, ++n)
    sum += static_cast<double>(it->second.size());
  return n ? sum / static_cast<double>(n) : 0;
}

// The Kafka path alone: one record at a time at `rate`/s for `seconds`, from a
// producer with the relay's settings to an ungrouped ChangeLogConsumer (same
// consumer settings as phase B) on `topic`; produce-to-consume latency in ms.
Result<std::vector<double>> ProbeKafkaPath(const ClusterConfig& cfg, BenchBroker* broker,
                                           const std::string& topic, double rate, double seconds,
                                           const std::string& payload) {
  if (broker) CELLAR_RETURN_IF_ERROR(broker->CreateTopic(topic, cfg.kafka.partitions));
  ProducerOptions options;
  options.settings = {{"enable.idempotence", "true"},
                      {"acks", "all"},
                      {"linger.ms", "1"},
                      {"message.timeout.ms", "30000"},
                      {"client.id", "cellar-bench-probe"}};
  CELLAR_ASSIGN_OR_RETURN(auto p, KafkaProducer::Create(cfg.kafka, std::move(options)));
  int parts = cfg.kafka.partitions;
  if (!broker) {
    CELLAR_ASSIGN_OR_RETURN(parts, BaselinePartitions(*p, topic, parts));
  }
  ConsumerOptions copts;
  copts.from_beginning = true;
  copts.client_id = "cellar-bench-probe";
  copts.extra_topics = {topic};
  CELLAR_ASSIGN_OR_RETURN(auto consumer, ChangeLogConsumer::Create(cfg, {}, copts));
  std::mutex mu;
  std::vector<double> ms;
  std::atomic<uint64_t> received{0};
  std::jthread reader([&](std::stop_token st) {
    while (!st.stop_requested() && !StopRequested()) {
      auto r = consumer->PollRecord(100);
      if (!r.ok() || !r->has_value()) continue;
      const MicrosSinceEpoch now = NowMicros();
      const MicrosSinceEpoch sent = std::atoll((*r)->key.c_str());
      if (sent <= 0) continue;  // the warm-up record
      std::lock_guard<std::mutex> lock(mu);
      ms.push_back(static_cast<double>(now - sent) / 1e3);
      received++;
    }
  });
  // Warm-up: connections and metadata.
  p->Produce(topic, 0, /*key=*/"", "warm-up", /*timestamp_ms=*/0).IgnoreError();
  p->Flush(5000).IgnoreError();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int64_t total = static_cast<int64_t>(rate * seconds);
  const auto start = Stopwatch::Clock::now();
  for (int64_t k = 0; k < total && !StopRequested(); ++k) {
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Stopwatch::Clock::duration>(
                    std::chrono::duration<double>(static_cast<double>(k) / rate)));
    const std::string key = std::to_string(NowMicros());
    p->Produce(topic, static_cast<int32_t>(k % parts), key, payload, /*timestamp_ms=*/0)
        .IgnoreError();
    p->Poll(0);
  }
  p->Flush(10000).IgnoreError();
  WaitUntil([&] { return received.load() >= static_cast<uint64_t>(total); }, 10);
  reader.request_stop();
  reader.join();
  consumer->Close();
  std::lock_guard<std::mutex> lock(mu);
  return ms;
}

}  // namespace cellar::bench::relay_parts
