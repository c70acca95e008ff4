#include "changelog/kafka/change_log_consumer.h"

#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <exception>
#include <optional>

#include "base/log.h"
#include "changelog/kafka/internal/kafka_conf.h"
#include "changelog/kafka/internal/read_positions.h"

namespace cellar {
namespace {

std::vector<TopicPartitionId> Ids(const std::vector<RdKafka::TopicPartition*>& parts) {
  std::vector<TopicPartitionId> out;
  out.reserve(parts.size());
  for (const auto* p : parts) out.push_back(TopicPartitionId{p->topic(), p->partition()});
  return out;
}

// Owned TopicPartition handles for librdkafka calls.
class PartitionList {
 public:
  explicit PartitionList(const std::vector<TopicPartitionId>& ids) {
    for (const auto& id : ids)
      parts_.push_back(RdKafka::TopicPartition::create(id.topic, id.partition));
  }
  ~PartitionList() { RdKafka::TopicPartition::destroy(parts_); }
  PartitionList(const PartitionList&) = delete;
  PartitionList& operator=(const PartitionList&) = delete;
  std::vector<RdKafka::TopicPartition*>& get() { return parts_; }

 private:
  std::vector<RdKafka::TopicPartition*> parts_;
};

// How long an assignment waits for the group's committed offsets (to tell
// skipped records, ConsumerOptions::on_skipped).
constexpr int kCommittedTimeoutMs = 5000;
constexpr int kFetchWaitMaxMs = 500;

}  // namespace

struct ChangeLogConsumer::Impl : public RdKafka::RebalanceCb {
  std::function<void(RebalanceKind, const std::vector<TopicPartitionId>&)> on_rebalance;
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
  bool closed = false;
  std::function<void(const SkippedRecords&)> on_skipped;
  internal::ReadPositions positions;  // grouped mode only

  // Where the newly assigned partitions resume: their committed offsets (a
  // partition whose offset cannot be read is not checked until its first
  // record).
  void ExpectCommitted(RdKafka::KafkaConsumer* c,
                       const std::vector<RdKafka::TopicPartition*>& partitions) {
    PartitionList committed(Ids(partitions));
    const RdKafka::ErrorCode e = c->committed(committed.get(), kCommittedTimeoutMs);
    for (const RdKafka::TopicPartition* p : committed.get())
      positions.Assigned(
          {p->topic(), p->partition()},
          e == RdKafka::ERR_NO_ERROR && p->err() == RdKafka::ERR_NO_ERROR ? p->offset() : -1);
  }

  // Of a hole in the offsets read, the records deleted before they were
  // read. The exactly-once relay's transactions put a commit marker (one
  // offset no consumer gets) after each batch in each partition, so a hole
  // of one offset is that marker; a larger one (retention, or an aborted
  // transaction's records, or markers of two producers' transactions that
  // interleave) is lost only below the partition's log start. The fetch
  // response that brought the record after the hole carries the log start
  // (librdkafka keeps it: get_watermark_offsets); the broker is asked only
  // when none is known, since that query waits behind this consumer's own
  // long-polling fetch (fetch.wait.max.ms) and the polling thread with it.
  std::optional<SkippedRecords> Lost(SkippedRecords hole) {
    if (hole.count() <= 1) return std::nullopt;
    int64_t low = -1, high = -1;
    if (consumer->get_watermark_offsets(hole.partition.topic, hole.partition.partition, &low,
                                        &high) != RdKafka::ERR_NO_ERROR ||
        low < 0)
      if (consumer->query_watermark_offsets(hole.partition.topic, hole.partition.partition, &low,
                                            &high, kCommittedTimeoutMs) != RdKafka::ERR_NO_ERROR)
        return hole;  // cannot tell: count it rather than hide a loss
    if (low <= hole.first) return std::nullopt;
    hole.end = std::min(hole.end, low);
    return hole;
  }

  void Notify(RebalanceKind kind, const std::vector<TopicPartitionId>& ids) {
    if (!on_rebalance) return;
    try {
      on_rebalance(kind, ids);
    } catch (const std::exception& e) {
      LogError("changelog", "rebalance callback threw", {{"error", e.what()}});
    } catch (...) {
      LogError("changelog", "rebalance callback threw a non-standard exception");
    }
  }

  // librdkafka calls this on the polling thread. Assignment first, then the
  // owner hears of it; the owner hears of a revocation while the partitions
  // are still ours, so it can commit finished work.
  void rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& partitions) override {
    const bool cooperative = c->rebalance_protocol() == "COOPERATIVE";
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      if (cooperative) {
        std::unique_ptr<RdKafka::Error> e(c->incremental_assign(partitions));
        if (e) LogWarn("changelog", "incremental assign failed", {{"error", e->str()}});
      } else if (RdKafka::ErrorCode e = c->assign(partitions); e != RdKafka::ERR_NO_ERROR) {
        LogWarn("changelog", "assign failed", {{"error", RdKafka::err2str(e)}});
      }
      if (on_skipped) ExpectCommitted(c, partitions);
      Notify(RebalanceKind::kAssigned, Ids(partitions));
      return;
    }
    for (const TopicPartitionId& id : Ids(partitions)) positions.Revoked(id);
    Notify(RebalanceKind::kRevoked, Ids(partitions));
    if (cooperative) {
      std::unique_ptr<RdKafka::Error> e(c->incremental_unassign(partitions));
      if (e) LogWarn("changelog", "incremental unassign failed", {{"error", e->str()}});
    } else if (RdKafka::ErrorCode e = c->unassign(); e != RdKafka::ERR_NO_ERROR) {
      LogWarn("changelog", "unassign failed", {{"error", RdKafka::err2str(e)}});
    }
  }
};

ChangeLogConsumer::ChangeLogConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<ChangeLogConsumer>> ChangeLogConsumer::Create(
    const ClusterConfig& config, const std::vector<std::string>& datastores,
    const ConsumerOptions& options) {
  std::vector<std::string> topics;
  for (const auto& d : datastores) {
    if (!config.FindDatastore(d)) return InvalidArgument("unknown datastore '" + d + "'");
    topics.push_back(ChangeLogTopic(config.kafka, d));
  }
  for (const auto& t : options.extra_topics) topics.push_back(t);
  const bool grouped = !options.group_id.empty();
  CELLAR_ASSIGN_OR_RETURN(
      auto conf,
      MakeKafkaConf(config.kafka,
                    {{"group.id", grouped ? options.group_id : "cellar-reader-ungrouped"},
                     {"client.id", options.client_id},
                     {"enable.auto.commit", "false"},
                     {"enable.auto.offset.store", "false"},
                     {"auto.offset.reset", options.from_beginning ? "earliest" : "latest"},
                     {"session.timeout.ms", std::to_string(options.session_timeout_ms)},
                     {"heartbeat.interval.ms", std::to_string(options.session_timeout_ms / 3)},
                     {"topic.metadata.refresh.interval.ms", "5000"},
                     // Long polls: the broker answers a fetch as soon as a
                     // record is readable (for read_committed: its transaction
                     // committed), so waiting longer costs no latency, while
                     // an idle consumer asks 2 times a second instead of 100.
                     {"fetch.wait.max.ms", std::to_string(kFetchWaitMaxMs)}}));
  auto impl = std::make_unique<Impl>();
  impl->on_rebalance = options.on_rebalance;
  if (grouped) impl->on_skipped = options.on_skipped;
  std::string err;
  if (grouped && conf->set("rebalance_cb", static_cast<RdKafka::RebalanceCb*>(impl.get()), err) !=
                     RdKafka::Conf::CONF_OK)
    return InvalidArgument("Kafka rebalance_cb: " + err);
  impl->consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!impl->consumer)
    return InvalidArgument("Kafka consumer: " + err + KafkaPropertiesNote(config.kafka));
  RdKafka::ErrorCode e;
  if (grouped) {
    e = impl->consumer->subscribe(topics);
  } else {
    std::vector<RdKafka::TopicPartition*> parts;
    for (const auto& t : topics)
      for (int p = 0; p < config.kafka.partitions; ++p)
        parts.push_back(RdKafka::TopicPartition::create(t, p,
                                                        options.from_beginning
                                                            ? RdKafka::Topic::OFFSET_BEGINNING
                                                            : RdKafka::Topic::OFFSET_END));
    e = impl->consumer->assign(parts);
    RdKafka::TopicPartition::destroy(parts);
  }
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka subscribe: " + RdKafka::err2str(e));
  return std::unique_ptr<ChangeLogConsumer>(new ChangeLogConsumer(std::move(impl)));
}

ChangeLogConsumer::~ChangeLogConsumer() { Close(); }

void ChangeLogConsumer::Close() {
  if (impl_->closed || !impl_->consumer) return;
  impl_->closed = true;
  impl_->consumer->close();
}

Result<std::optional<ConsumedRecord>> ChangeLogConsumer::PollRecord(int timeout_ms) {
  std::unique_ptr<RdKafka::Message> m(impl_->consumer->consume(timeout_ms));
  switch (m->err()) {
    case RdKafka::ERR__TIMED_OUT:
    case RdKafka::ERR__PARTITION_EOF:
      return std::optional<ConsumedRecord>();
    case RdKafka::ERR_NO_ERROR:
      break;
    case RdKafka::ERR_UNKNOWN_TOPIC_OR_PART:
    case RdKafka::ERR__UNKNOWN_TOPIC:
      return std::optional<ConsumedRecord>();  // not created yet: nothing to read
    default:
      return Unavailable("Kafka consume: " + m->errstr());
  }
  if (impl_->on_skipped)
    if (auto skipped = impl_->positions.Read({m->topic_name(), m->partition()}, m->offset()))
      if (std::optional<SkippedRecords> lost = impl_->Lost(*skipped)) impl_->on_skipped(*lost);
  return std::optional<ConsumedRecord>(RecordOf(*m));
}

Result<std::optional<ConsumedEvent>> ChangeLogConsumer::Poll(int timeout_ms) {
  CELLAR_ASSIGN_OR_RETURN(auto rec, PollRecord(timeout_ms));
  if (!rec) return std::optional<ConsumedEvent>();
  const std::string where =
      rec->topic + "/" + std::to_string(rec->partition) + "@" + std::to_string(rec->offset);
  auto ev = DecodeCellEvent(rec->value);
  if (!ev.ok()) return InvalidArgument("record " + where + ": " + ev.status().message());
  ConsumedEvent out;
  out.event = std::move(ev).value();
  out.topic = rec->topic;
  out.partition = rec->partition;
  out.offset = rec->offset;
  out.broker_timestamp_ms = rec->broker_timestamp_ms;
  return std::optional<ConsumedEvent>(std::move(out));
}

std::vector<Status> ChangeLogConsumer::Commit(const std::vector<CommitPosition>& positions) {
  if (positions.empty()) return {};
  std::vector<RdKafka::TopicPartition*> parts;
  parts.reserve(positions.size());
  for (const CommitPosition& p : positions)
    parts.push_back(
        RdKafka::TopicPartition::create(p.partition.topic, p.partition.partition, p.offset + 1));
  const RdKafka::ErrorCode e = impl_->consumer->commitSync(parts);
  std::vector<Status> out;
  out.reserve(parts.size());
  for (const RdKafka::TopicPartition* p : parts) {
    const RdKafka::ErrorCode pe = e != RdKafka::ERR_NO_ERROR ? e : p->err();
    out.push_back(pe == RdKafka::ERR_NO_ERROR
                      ? Status::Ok()
                      : Unavailable("Kafka commit of " + p->topic() + "/" +
                                    std::to_string(p->partition()) + ": " + RdKafka::err2str(pe)));
  }
  RdKafka::TopicPartition::destroy(parts);
  return out;
}

Status ChangeLogConsumer::Pause(const std::vector<TopicPartitionId>& partitions) {
  if (partitions.empty()) return Status::Ok();
  PartitionList parts(partitions);
  RdKafka::ErrorCode e = impl_->consumer->pause(parts.get());
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka pause: " + RdKafka::err2str(e));
  return Status::Ok();
}

Status ChangeLogConsumer::Resume(const std::vector<TopicPartitionId>& partitions) {
  if (partitions.empty()) return Status::Ok();
  PartitionList parts(partitions);
  RdKafka::ErrorCode e = impl_->consumer->resume(parts.get());
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka resume: " + RdKafka::err2str(e));
  return Status::Ok();
}

Result<std::vector<TopicPartitionId>> ChangeLogConsumer::Assignment() {
  std::vector<RdKafka::TopicPartition*> parts;
  RdKafka::ErrorCode e = impl_->consumer->assignment(parts);
  std::vector<TopicPartitionId> out = Ids(parts);
  RdKafka::TopicPartition::destroy(parts);
  if (e != RdKafka::ERR_NO_ERROR) return Unavailable("Kafka assignment: " + RdKafka::err2str(e));
  return out;
}

Result<int64_t> ChangeLogConsumer::KnownEnd(const TopicPartitionId& partition) {
  int64_t low = 0, high = 0;
  RdKafka::ErrorCode e =
      impl_->consumer->get_watermark_offsets(partition.topic, partition.partition, &low, &high);
  if (e != RdKafka::ERR_NO_ERROR || high < 0)
    return NotFound("no end known yet for " + partition.topic + "/" +
                    std::to_string(partition.partition));
  return high;
}

Result<int64_t> ChangeLogConsumer::QueryEnd(const TopicPartitionId& partition, int timeout_ms) {
  return PartitionHighWatermark(impl_->consumer.get(), partition.topic, partition.partition,
                                timeout_ms);
}

}  // namespace cellar
