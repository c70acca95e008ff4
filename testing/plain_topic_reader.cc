#include "testing/plain_topic_reader.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <memory>

namespace cellar::testing {
namespace {

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
};
struct PartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};

}  // namespace

Result<TopicContents> ReadTopic(const std::string& brokers, const std::string& topic,
                                int partitions, int timeout_ms) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::pair<const char*, std::string> settings[] = {
      {"bootstrap.servers", brokers},
      {"isolation.level", "read_committed"},
      // assign() needs a group id, but nothing joins or commits to the group.
      {"group.id", "history-check-reader"},
      {"enable.auto.commit", "false"},
      {"enable.partition.eof", "true"},
      {"log_level", "3"},
  };
  for (const auto& [name, value] : settings) {
    if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Status(StatusCode::kInternal, std::string(name) + ": " + err);
    }
  }
  rd_kafka_t* raw = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  if (raw == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Status(StatusCode::kInternal, std::string("consumer: ") + err);
  }
  std::unique_ptr<rd_kafka_t, KafkaDeleter> rk(raw);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left_ms = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
               .count()));
  };

  // Each partition's end now; records at or beyond it are left for a later read.
  std::map<int32_t, int64_t> end;
  TopicContents out;
  std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionListDeleter> assignment(
      rd_kafka_topic_partition_list_new(partitions));
  for (int32_t p = 0; p < partitions; ++p) {
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &low, &high, left_ms());
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      return Status(StatusCode::kUnavailable, "watermarks of " + topic + "/" + std::to_string(p) +
                                                  ": " + rd_kafka_err2str(e));
    out.log_start.push_back(low);
    if (high > low) {
      end[p] = high;
      rd_kafka_topic_partition_list_add(assignment.get(), topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
  }
  if (end.empty()) return out;
  if (rd_kafka_resp_err_t e = rd_kafka_assign(rk.get(), assignment.get()); e)
    return Status(StatusCode::kInternal, std::string("assign: ") + rd_kafka_err2str(e));

  while (!end.empty()) {
    if (left_ms() == 0)
      return Status(StatusCode::kUnavailable, "reading " + topic + " did not finish in time");
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk.get(), 100);
    if (m == nullptr) continue;
    const int32_t p = m->partition;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (end.count(p) && m->offset >= end[p]) end.erase(p);
    } else if (m->err) {
      const std::string what = rd_kafka_message_errstr(m);
      rd_kafka_message_destroy(m);
      return Status(StatusCode::kUnavailable, "consuming " + topic + ": " + what);
    } else if (end.count(p) && m->offset < end[p]) {
      TopicRecord r;
      r.partition = p;
      r.offset = m->offset;
      if (m->key) r.key.assign(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) r.value.assign(static_cast<const char*>(m->payload), m->len);
      out.records.push_back(std::move(r));
      if (m->offset + 1 >= end[p]) end.erase(p);
    }
    rd_kafka_message_destroy(m);
  }
  return out;
}

}  // namespace cellar::testing
