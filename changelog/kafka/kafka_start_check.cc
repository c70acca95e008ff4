#include "changelog/kafka/kafka_start_check.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "changelog/kafka/internal/kafka_conf.h"

namespace cellar {
namespace {

using Clock = std::chrono::steady_clock;

// What librdkafka's error callback reported (it runs inside rd_kafka_poll()
// on the checking thread; the mutex keeps that an implementation detail).
struct Reported {
  std::mutex mu;
  rd_kafka_resp_err_t refused = RD_KAFKA_RESP_ERR_NO_ERROR;  // __AUTHENTICATION or __SSL
  std::string refused_reason;
  std::string last_reason;  // of any other error but "all brokers are down"
};

void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* r = static_cast<Reported*>(opaque);
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  const std::string why = reason != nullptr ? reason : rd_kafka_err2str(code);
  std::lock_guard<std::mutex> lock(r->mu);
  if (code == RD_KAFKA_RESP_ERR__AUTHENTICATION || code == RD_KAFKA_RESP_ERR__SSL) {
    if (r->refused == RD_KAFKA_RESP_ERR_NO_ERROR) {
      r->refused = code;
      r->refused_reason = why;
    }
  } else if (code != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || r->last_reason.empty()) {
    r->last_reason = why;  // e.g. __TRANSPORT: "... Connection refused"
  }
}

int MsUntil(Clock::time_point t) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

}  // namespace

Status CheckKafkaAtStart(const KafkaConfig& kafka, std::chrono::milliseconds timeout) {
  CELLAR_ASSIGN_OR_RETURN(auto conf, MakeKafkaConf(kafka, {{"client.id", "cellar-start-check"}}));
  Reported reported;
  rd_kafka_conf_t* c = rd_kafka_conf_dup(conf->c_ptr_global());
  rd_kafka_conf_set_error_cb(c, OnError);
  rd_kafka_conf_set_opaque(c, &reported);
  char errstr[512];
  // A producer: it joins no group and creates no topic.
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, errstr, sizeof errstr);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(c);
    return InvalidArgument("Kafka client for kafka.brokers=" + kafka.brokers + ": " + errstr +
                           KafkaPropertiesNote(kafka));
  }
  const std::string where = "Kafka at kafka.brokers=" + kafka.brokers;
  const Clock::time_point deadline = Clock::now() + timeout;
  Status result = Status::Ok();
  while (true) {
    // Short metadata requests, so that an error reported meanwhile ends the
    // wait early; each slice is waited out serving the error callback.
    const Clock::time_point slice_end =
        std::min(deadline, Clock::now() + std::chrono::milliseconds(500));
    const rd_kafka_metadata_t* md = nullptr;
    const rd_kafka_resp_err_t err =
        rd_kafka_metadata(rk, /*all_topics=*/0, nullptr, &md, std::max(1, MsUntil(slice_end)));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(md);
      break;
    }
    bool refused = false;
    do {
      rd_kafka_poll(rk, MsUntil(slice_end));
      std::lock_guard<std::mutex> lock(reported.mu);
      refused = reported.refused != RD_KAFKA_RESP_ERR_NO_ERROR;
    } while (!refused && Clock::now() < slice_end);
    std::lock_guard<std::mutex> lock(reported.mu);
    if (reported.refused == RD_KAFKA_RESP_ERR__AUTHENTICATION) {
      result = Unavailable(where + ": authentication failed: " + reported.refused_reason +
                           " (check kafka.properties sasl.mechanisms, sasl.username, "
                           "sasl.password)");
      break;
    }
    if (reported.refused == RD_KAFKA_RESP_ERR__SSL) {
      result = Unavailable(where + ": TLS handshake failed: " + reported.refused_reason +
                           " (check kafka.properties ssl.ca.location: the CA that signed the "
                           "broker's certificate, which must name the address connected to)");
      break;
    }
    if (Clock::now() >= deadline) {
      result = Unavailable(where + " did not answer within " + std::to_string(timeout.count()) +
                           " ms: " +
                           (reported.last_reason.empty() ? std::string(rd_kafka_err2str(err))
                                                         : reported.last_reason) +
                           KafkaPropertiesNote(kafka));
      break;
    }
  }
  rd_kafka_destroy(rk);
  return result;
}

}  // namespace cellar
