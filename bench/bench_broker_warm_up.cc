#include "bench/bench_broker_warm_up.h"

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_common.h"

namespace cellar::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaHandle = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

Result<KafkaHandle> MakeClient(rd_kafka_type_t type,
                               const std::vector<std::pair<std::string, std::string>>& settings) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : settings) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Unavailable("broker warm-up: " + k + ": " + err);
    }
  }
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);  // owns conf on success
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Unavailable(std::string("broker warm-up: ") + err);
  }
  return KafkaHandle(rk);
}

Status TxnStatus(rd_kafka_error_t* error, const char* what) {
  if (error == nullptr) return Status::Ok();
  const std::string text = rd_kafka_error_string(error);
  rd_kafka_error_destroy(error);
  return Unavailable(std::string("broker warm-up: ") + what + ": " + text);
}

}  // namespace

double JvmCompilerCpuSeconds(long pid) { return ThreadsCpuSeconds(pid, "CompilerThre"); }

Result<BrokerWarmUp> WarmUpBroker(const std::string& bootstrap, const std::string& topic,
                                  int partitions, long jvm_pid, double min_seconds,
                                  double max_seconds) {
  BrokerWarmUp out;
  const std::vector<std::pair<std::string, std::string>> common = {
      {"bootstrap.servers", bootstrap}, {"socket.nagle.disable", "true"}, {"linger.ms", "0"}};
  auto with = [&](std::vector<std::pair<std::string, std::string>> more) {
    more.insert(more.begin(), common.begin(), common.end());
    return more;
  };
  CELLAR_ASSIGN_OR_RETURN(
      KafkaHandle txn,
      MakeClient(RD_KAFKA_PRODUCER, with({{"transactional.id", topic + ".txn"}, {"acks", "all"}})));
  CELLAR_ASSIGN_OR_RETURN(
      KafkaHandle plain,
      MakeClient(RD_KAFKA_PRODUCER, with({{"enable.idempotence", "true"}, {"acks", "all"}})));
  CELLAR_ASSIGN_OR_RETURN(KafkaHandle consumer,
                          MakeClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", bootstrap},
                                                         {"group.id", topic + ".group"},
                                                         {"isolation.level", "read_committed"},
                                                         {"auto.offset.reset", "earliest"},
                                                         {"auto.commit.interval.ms", "100"},
                                                         {"fetch.wait.max.ms", "10"}}));
  CELLAR_RETURN_IF_ERROR(TxnStatus(rd_kafka_init_transactions(txn.get(), 30000), "init"));
  rd_kafka_poll_set_consumer(consumer.get());
  rd_kafka_topic_partition_list_t* subscription = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(subscription, topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer.get(), subscription);
  rd_kafka_topic_partition_list_destroy(subscription);

  std::atomic<long> consumed{0};
  // Declared after the consumer: joined before the consumer is destroyed.
  std::jthread reader([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer.get(), 50);
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) consumed++;
      rd_kafka_message_destroy(m);
    }
  });

  const std::string value(400, 'w');
  const auto start = Clock::now();
  const double compiler_at_start = JvmCompilerCpuSeconds(jvm_pid);
  std::deque<std::pair<Clock::time_point, double>> samples;  // (when, compiler CPU)
  for (;;) {
    CELLAR_RETURN_IF_ERROR(TxnStatus(rd_kafka_begin_transaction(txn.get()), "begin"));
    for (int i = 0; i < 4 * partitions; ++i) {
      for (rd_kafka_t* p : {txn.get(), plain.get()}) {
        if (rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic.c_str()),
                              RD_KAFKA_V_PARTITION(static_cast<int32_t>(i % partitions)),
                              RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR_NO_ERROR)
          out.records++;
      }
    }
    CELLAR_RETURN_IF_ERROR(TxnStatus(rd_kafka_commit_transaction(txn.get(), 30000), "commit"));
    rd_kafka_flush(plain.get(), 30000);
    out.transactions++;
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double compiler = JvmCompilerCpuSeconds(jvm_pid);
    samples.emplace_back(now, compiler);
    while (now - samples.front().first > std::chrono::seconds(5)) samples.pop_front();
    const double window = std::chrono::duration<double>(now - samples.front().first).count();
    const bool settled = window >= 4.5 && (compiler - samples.front().second) / window < 0.05;
    if (elapsed >= max_seconds || (elapsed >= min_seconds && settled) || StopRequested()) {
      out.seconds = elapsed;
      out.compiler_cpu_s = compiler - compiler_at_start;
      break;
    }
  }
  reader.request_stop();
  reader.join();  // no poll may run while the consumer closes
  out.consumed = consumed;
  rd_kafka_consumer_close(consumer.get());
  return out;
}

}  // namespace cellar::bench
