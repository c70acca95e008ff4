// Reading what a topic holds now through a consumer group: for tools that
// walk a small topic once (a trigger's dead letters) and, if asked, remember
// in the group how far they got.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "changelog/kafka/change_log_consumer.h"
#include "config/cluster_config.h"

namespace cellar {

// Reads the records `topic` holds when called, as member of `group` (starting
// at the group's committed offsets, or at the beginning), calling fn for each
// in partition order. With `commit`, a record's offset is committed after fn
// returned true for it (false leaves it, and so every later record of its
// partition, for the next call). Records produced meanwhile are not read, so a
// caller that writes to the topic from fn still ends. Returns once every such
// record was read, or after idle_ms without one (or 20 s without an
// assignment). OK at once when the topic does not exist or holds nothing for
// the group. Unavailable when its ends cannot be read or subscribing fails;
// InvalidArgument for a bad Kafka setting.
Status ReadTopicSnapshot(const ClusterConfig& config, const std::string& group,
                         const std::string& topic, bool commit, int idle_ms,
                         const std::function<bool(const ConsumedRecord&)>& fn);

}  // namespace cellar
