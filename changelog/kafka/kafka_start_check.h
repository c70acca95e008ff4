// CheckKafkaAtStart: the start-up check of every Cellar process that talks
// to Kafka (cellar-relay, cellar-indexer, cellar-trigger, cellar-billing).
//
// librdkafka retries a broker it cannot use (refused connection, failed TLS
// handshake, failed SASL authentication) for ever, and reports why only to
// its log and error callback, so a misconfigured process would otherwise
// hang or fail later with "Local: Broker transport failure". This check makes
// one throw-away client from the cluster config (kafka.brokers and
// kafka.properties, as every Cellar client) and asks for metadata until a
// broker answers or the timeout passes, and turns librdkafka's errors into a
// Status that names kafka.brokers and the cause.
#pragma once

#include <chrono>

#include "base/status.h"
#include "config/cluster_config.h"

namespace cellar {

// How long a process waits at start for a broker to answer (a broker that is
// itself starting gets this long).
constexpr std::chrono::milliseconds kKafkaStartCheckTimeout{10'000};

// OK once a broker of kafka.brokers answers a metadata request. Otherwise:
//  - Unavailable "Kafka at kafka.brokers=<list>: authentication failed: <why>
//    (check kafka.properties sasl.mechanisms, sasl.username, sasl.password)"
//    as soon as librdkafka reports an authentication error;
//  - Unavailable "Kafka at kafka.brokers=<list>: TLS handshake failed: <why>
//    (check kafka.properties ssl.ca.location ...)" as soon as it reports a
//    TLS error (e.g. "certificate verify failed");
//  - Unavailable "Kafka at kafka.brokers=<list> did not answer within <n> ms:
//    <last connection error>" (e.g. "Connection refused") when no broker
//    answered within `timeout`;
//  - InvalidArgument as MakeKafkaConf (no kafka.brokers, a property
//    librdkafka rejects or Cellar owns) or when librdkafka refuses the client.
// Blocks for at most about `timeout`. Thread-safe.
Status CheckKafkaAtStart(const KafkaConfig& kafka,
                         std::chrono::milliseconds timeout = kKafkaStartCheckTimeout);

}  // namespace cellar
