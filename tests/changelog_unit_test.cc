// Unit tests of the change log's Kafka surface without a broker: the
// CloudEvents headers of an event (changelog/cell_event.h), kafka.properties
// as a Kafka client sees them (named errors for what librdkafka refuses or
// Cellar owns), and librdkafka's log lines in Cellar's structured log.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "base/time.h"
#include "changelog/cell_event.h"
#include "changelog/internal/relay_pacing.h"
#include "changelog/kafka/change_log_consumer.h"
#include "changelog/kafka/internal/read_positions.h"
#include "changelog/kafka/kafka_producer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cellar {

void PrintTo(const EventHeader& h, std::ostream* os) { *os << h.name << ": " << h.value; }

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Cell SampleCell() {
  Cell c;
  c.row_key = Uuid::Parse("6b82bf47-eed5-4707-991b-3cf64b41a40d").value();
  c.column = "BASE";
  c.ref_key = 3;
  c.body = {{"fare", 12}};
  c.created_at = ParseRfc3339("2026-11-22T02:07:47.716308Z").value();
  c.shard = 7;
  c.added_id = 1042;
  return c;
}

KafkaConfig Kafka(const std::string& prefix = "cellar") {
  KafkaConfig k;
  k.brokers = "127.0.0.1:1";  // nothing listens: clients are built, never used
  k.topic_prefix = prefix;
  return k;
}

TEST(CloudEventHeadersTest, KafkaBindingOfAWrittenCell) {
  EXPECT_THAT(
      CloudEventHeaders(CloudEventBinding::kKafka, Kafka("prod"), "trips", SampleCell()),
      ElementsAre(EventHeader{"ce_specversion", "1.0"}, EventHeader{"ce_id", "trips:7:1042"},
                  EventHeader{"ce_source", "cellar://prod/trips"},
                  EventHeader{"ce_type", "cellar.cell.written"},
                  EventHeader{"ce_time", "2026-11-22T02:07:47.716308Z"},
                  EventHeader{"ce_subject", "6b82bf47-eed5-4707-991b-3cf64b41a40d/BASE/3"},
                  EventHeader{"content-type", "application/json"}));
}

TEST(CloudEventHeadersTest, TombstoneIsErasedAndTimeKeepsMicroseconds) {
  Cell c = SampleCell();
  c.tombstone = true;
  c.body = nullptr;
  c.created_at = ParseRfc3339("2026-01-02T03:04:05Z").value();  // whole second
  auto h = CloudEventHeaders(CloudEventBinding::kKafka, Kafka(), "trips", c);
  ASSERT_EQ(h.size(), 7u);
  EXPECT_EQ(h[3], (EventHeader{"ce_type", "cellar.cell.erased"}));
  EXPECT_EQ(h[4], (EventHeader{"ce_time", "2026-01-02T03:04:05.000000Z"}));
}

TEST(CloudEventHeadersTest, HttpBindingUsesDashesAndLeavesContentTypeToTheRequest) {
  EXPECT_THAT(
      CloudEventHeaders(CloudEventBinding::kHttp, Kafka(), "users", SampleCell()),
      ElementsAre(EventHeader{"ce-specversion", "1.0"}, EventHeader{"ce-id", "users:7:1042"},
                  EventHeader{"ce-source", "cellar://cellar/users"},
                  EventHeader{"ce-type", "cellar.cell.written"},
                  EventHeader{"ce-time", "2026-11-22T02:07:47.716308Z"},
                  EventHeader{"ce-subject", "6b82bf47-eed5-4707-991b-3cf64b41a40d/BASE/3"}));
}

TEST(CloudEventHeadersTest, TheRecordValueIsUnchanged) {
  // The headers are added beside the value: the value is still the event JSON.
  const Cell c = SampleCell();
  EXPECT_EQ(EncodeCellEvent("trips", c, 1 << 20), EncodeCellEventViaDocument("trips", c, 1 << 20));
  auto back = DecodeCellEvent(EncodeCellEvent("trips", c, 1 << 20));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cell.added_id, 1042u);
}

// ---------------------------------------------------------------------------

Status CreateProducer(const KafkaConfig& kafka) {
  auto p = KafkaProducer::Create(kafka, ProducerOptions{});
  return p.ok() ? Status::Ok() : p.status();
}

TEST(ReadPositionsTest, ARecordPastTheExpectedOffsetShowsTheRecordsSkipped) {
  internal::ReadPositions positions;
  const TopicPartitionId p0{"t", 0}, p1{"t", 1};
  positions.Assigned(p0, 5);  // committed: the next record is 5
  EXPECT_FALSE(positions.Read(p0, 5));
  EXPECT_FALSE(positions.Read(p0, 6));
  auto skipped = positions.Read(p0, 10);  // 7, 8, 9 are gone
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->partition, p0);
  EXPECT_EQ(skipped->first, 7);
  EXPECT_EQ(skipped->end, 10);
  EXPECT_EQ(skipped->count(), 3);
  EXPECT_FALSE(positions.Read(p0, 11));
  EXPECT_FALSE(positions.Read(p0, 3)) << "a record read again after a rewind is no hole";
  EXPECT_FALSE(positions.Read(p0, 4));

  // Nothing committed: wherever the reset policy starts is no loss.
  positions.Assigned(p1, -1);
  EXPECT_FALSE(positions.Read(p1, 100));
  EXPECT_EQ(positions.Read(p1, 102)->first, 101);

  // Assigned at a committed offset the broker no longer has: the first record
  // (the earliest left) shows the hole at once.
  positions.Revoked(p0);
  positions.Assigned(p0, 20);
  skipped = positions.Read(p0, 50);
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->first, 20);
  EXPECT_EQ(skipped->count(), 30);
  // Revoked and assigned again with nothing known: no check until a record.
  positions.Revoked(p0);
  EXPECT_FALSE(positions.Read(p0, 70));
}

TEST(KafkaPropertiesClientTest, AcceptedPropertiesBuildAClient) {
  KafkaConfig k = Kafka();
  k.properties = {{"client.id", "unit"},
                  {"socket.keepalive.enable", "true"},
                  {"security.protocol", "plaintext"}};
  Status s = CreateProducer(k);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(KafkaPropertiesClientTest, UnknownNameIsAnErrorNamingTheKeyAndWhere) {
  KafkaConfig k = Kafka();
  k.properties = {{"no.such.property", "1"}};
  k.property_origins = {{"no.such.property", "cellar.yaml:12"}};
  Status s = CreateProducer(k);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cellar.yaml:12: kafka.properties.no.such.property"));
  EXPECT_THAT(s.message(), HasSubstr("No such configuration property"));
}

TEST(KafkaPropertiesClientTest, BadValueIsAnErrorNamingTheKey) {
  KafkaConfig k = Kafka();
  k.properties = {{"security.protocol", "tls"}};
  Status s = CreateProducer(k);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kafka.properties.security.protocol"));
  EXPECT_THAT(s.message(), HasSubstr("'tls'"));
}

TEST(KafkaPropertiesClientTest, OwnedPropertySetInCodeIsRefusedToo) {
  // The YAML loader refuses these (config_test); a config built in code gets
  // the same answer from the client.
  for (const char* name : {"bootstrap.servers", "enable.idempotence", "transactional.id",
                           "group.id", "enable.auto.commit"}) {
    KafkaConfig k = Kafka();
    k.properties = {{name, "x"}};
    Status s = CreateProducer(k);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), HasSubstr(std::string("kafka.properties.") + name));
    EXPECT_THAT(s.message(), HasSubstr("set by Cellar"));
  }
}

TEST(KafkaPropertiesClientTest, ClientCreationFailureNamesTheProperties) {
  KafkaConfig k = Kafka();
  k.properties = {{"security.protocol", "ssl"}, {"ssl.ca.location", "/nonexistent/ca.pem"}};
  Status s = CreateProducer(k);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("ssl.ca.location"));
}

// ---------------------------------------------------------------------------

// Captures what this process writes to fd 2 while alive.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    path_ = ::testing::TempDir() + "/stderr_capture_" + std::to_string(::getpid());
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    saved_ = ::dup(2);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() {
    Restore();
    std::remove(path_.c_str());
  }
  std::string Restore() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST(KafkaLogTest, LibrdkafkaLinesGoToTheStructuredLog) {
  SetLogLevel(LogLevel::kDebug);
  std::string err;
  {
    StderrCapture capture;
    {
      KafkaConfig k = Kafka();
      k.properties = {{"debug", "generic"}, {"client.id", "logtest"}};
      auto p = KafkaProducer::Create(k, ProducerOptions{});
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      // Topic metadata from nobody: librdkafka logs its attempts meanwhile.
      (*p)->TopicPartitions("t", 300).status().IgnoreError();
    }
    {
      // A consumer (no event_cb: its lines come through the conf's log_cb).
      ClusterConfig cfg;
      cfg.kafka = Kafka();
      cfg.kafka.properties = {{"debug", "generic"}, {"client.id", "logtest-consumer"}};
      ConsumerOptions options;
      options.client_id = "ignored";  // kafka.properties win over Cellar's defaults
      auto c = ChangeLogConsumer::Create(cfg, {}, options);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      (*c)->Close();
    }
    err = capture.Restore();
  }
  SetLogLevel(LogLevel::kInfo);
  EXPECT_THAT(err, HasSubstr("component=kafka")) << err;
  EXPECT_THAT(err, HasSubstr("client=logtest facility=")) << err;
  EXPECT_THAT(err, HasSubstr("client=logtest-consumer#consumer")) << err;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    EXPECT_EQ(line.rfind("ts=", 0), 0u) << "not a structured line: " << line;
    EXPECT_THAT(line, Not(HasSubstr("|rdkafka#"))) << line;
  }
}

// A trickle is read in pages of about target_batch_cells: the pause is what
// they take at the rate the last read saw, within poll_min_ms..poll_max_ms.
TEST(RelayPacingTest, ATricklePausesForTheTargetBatchWithinThePollBounds) {
  using std::chrono::milliseconds;
  RelayConfig relay;
  relay.poll_min_ms = 40;
  relay.poll_max_ms = 60;
  relay.target_batch_cells = 60;
  EXPECT_EQ(60, internal::TrickleWaitMs(relay, 40, milliseconds(40)));  // 1,000/s: 60 ms
  EXPECT_EQ(50, internal::TrickleWaitMs(relay, 48, milliseconds(40)));  // 1,200/s: 50 ms
  EXPECT_EQ(40,
            internal::TrickleWaitMs(relay, 80, milliseconds(40)));  // 2,000/s: 30 ms, at least 40
  EXPECT_EQ(60, internal::TrickleWaitMs(relay, 2, milliseconds(60)));  // 33/s: at most 60
  EXPECT_EQ(40, internal::TrickleWaitMs(relay, 5, milliseconds(0)));   // rate not known
  EXPECT_EQ(40, internal::TrickleWaitMs(relay, 0, milliseconds(60)));  // nothing read
  relay.target_batch_cells = 0;
  EXPECT_EQ(40, internal::TrickleWaitMs(relay, 2, milliseconds(60)));  // off: poll_min_ms
  relay.target_batch_cells = 60;
  relay.poll_max_ms = 10;  // below the minimum (only code can set it): the minimum
  EXPECT_EQ(40, internal::TrickleWaitMs(relay, 2, milliseconds(60)));
}

}  // namespace
}  // namespace cellar
