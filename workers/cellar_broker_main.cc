// cellar-broker: a local Kafka-protocol broker for development and
// benchmarks, backed by librdkafka's in-memory mock cluster.
//
//   cellar-broker --brokers 1 --topic cellar.trips.cells:8 --bootstrap-file /tmp/broker
//
// Starts the brokers on 127.0.0.1 ephemeral ports, creates the topics, prints
// the bootstrap address ("127.0.0.1:port[,...]") as one line on stdout and,
// with --bootstrap-file, writes it (atomically, via rename) to that file. Runs
// until SIGTERM or SIGINT, then removes the file and exits 0. Exits 1 if it
// cannot start. All messages live in memory and are lost on exit. Unknown
// topics are auto-created with 4 partitions when a client asks for them.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/atomic_file.h"
#include "base/log.h"
#include "base/signal_wait.h"
#include "config/command_line.h"
#include "config/number_options.h"
#include "testing/local_broker.h"

namespace {

constexpr std::string_view kComponent = "broker";

struct TopicSpec {
  std::string name;
  int partitions = 0;
};

// "NAME:PARTITIONS" -> spec; "" on success, else what is wrong.
std::string ParseTopic(const std::string& arg, TopicSpec* out) {
  const auto colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "expected NAME:PARTITIONS, got '" + arg + "'";
  out->name = arg.substr(0, colon);
  if (out->name.size() > 249) return "topic name longer than 249 characters: '" + arg + "'";
  for (char c : out->name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return "topic name may only contain [A-Za-z0-9._-]: '" + arg + "'";
  }
  const std::string count = arg.substr(colon + 1);
  const std::optional<int> n = cellar::ParseDecimalInteger<int>(count);
  if (!n || *n < 1 || *n > 10000)
    return "partitions must be 1-10000, got '" + count + "' in '" + arg + "'";
  out->partitions = *n;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cellar-broker: an in-memory Kafka-protocol broker (librdkafka mock cluster)"};
  int brokers = 1;
  std::vector<std::string> topic_args;
  std::string bootstrap_file;
  app.add_option("--brokers", brokers, "number of brokers (1-64)")
      ->transform(cellar::DecimalInteger<int>(1, 64));
  app.add_option("--topic", topic_args, "topic to create, NAME:PARTITIONS (repeatable)");
  app.add_option("--bootstrap-file", bootstrap_file,
                 "write the bootstrap address to this file once ready; removed on exit");
  if (auto exit_code = cellar::ParseCommandLine(app, argc, argv)) return *exit_code;

  std::vector<TopicSpec> topics;
  for (const auto& arg : topic_args) {
    TopicSpec spec;
    if (std::string err = ParseTopic(arg, &spec); !err.empty()) {
      std::fprintf(stderr, "cellar-broker: --topic: %s\n", err.c_str());
      return cellar::kUsageExitCode;
    }
    topics.push_back(spec);
  }
  // A stale file from an earlier run must not look like this run's address.
  if (!bootstrap_file.empty()) unlink(bootstrap_file.c_str());

  // Before the broker's threads start, so they inherit the blocked mask and
  // the wait below is the only receiver.
  cellar::BlockTerminationSignals();

  std::unique_ptr<cellar::testing::LocalBroker> broker;
  try {
    broker = cellar::testing::LocalBroker::Start(brokers);
  } catch (const std::exception& e) {
    cellar::LogError(kComponent, "cannot start the mock cluster", {{"error", e.what()}});
    return 1;
  }
  for (const auto& t : topics) {
    if (cellar::Status s = broker->CreateTopic(t.name, t.partitions); !s.ok()) {
      cellar::LogError(kComponent, "cannot create topic",
                       {{"topic", t.name}, {"error", s.ToString()}});
      return 1;
    }
    cellar::LogInfo(kComponent, "created topic",
                    {{"topic", t.name}, {"partitions", std::to_string(t.partitions)}});
  }

  const std::string bootstrap = broker->bootstrap();
  if (cellar::Status s = bootstrap_file.empty()
                             ? cellar::Status::Ok()
                             : cellar::WriteFileAtomically(bootstrap_file, bootstrap + "\n");
      !s.ok()) {
    cellar::LogError(kComponent, "cannot write bootstrap file",
                     {{"path", bootstrap_file}, {"error", s.message()}});
    return 1;
  }
  std::printf("%s\n", bootstrap.c_str());
  std::fflush(stdout);
  cellar::LogInfo(kComponent, "ready",
                  {{"bootstrap", bootstrap}, {"brokers", std::to_string(brokers)}});

  int sig = 0;
  while (sig == 0) sig = cellar::WaitForTerminationSignal(1000);
  cellar::LogInfo(kComponent, "stopping", {{"signal", strsignal(sig)}});
  if (!bootstrap_file.empty()) unlink(bootstrap_file.c_str());
  broker.reset();
  cellar::LogInfo(kComponent, "stopped");
  return 0;
}
