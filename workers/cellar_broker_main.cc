// cellar-broker: a private Apache Kafka broker for development (scripts/up):
// a single-node KRaft server from the jars scripts/install-deps resolved
// (deps/kafka/pom.xml), started as testing::KafkaBroker starts it for tests.
//
//   cellar-broker --data-dir .local/kafka --topic cellar.trips.cells:8 --bootstrap-file F
//
// Starts the broker on free 127.0.0.1 ports, creates the topics, prints the
// bootstrap address ("127.0.0.1:port") as one line on stdout and, with
// --bootstrap-file, writes it (atomically, via rename) to that file. Runs
// until SIGTERM or SIGINT, then shuts the broker down, removes the file and
// exits 0. Exits 1 if it cannot start. With --data-dir the broker's storage
// is kept there across runs (formatted on first use); without it, it lives
// in a temporary directory removed on exit. Unknown topics are auto-created
// with 4 partitions when a client asks for them.
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
#include "testing/kafka_broker.h"

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
  CLI::App app{"cellar-broker: a private Apache Kafka broker (single-node KRaft)"};
  int heap_mb = 256;
  std::vector<std::string> topic_args;
  std::string bootstrap_file;
  std::string data_dir;
  app.add_option("--heap-mb", heap_mb, "the broker JVM's heap in MiB (64-65536)")
      ->transform(cellar::DecimalInteger<int>(64, 65536));
  app.add_option("--data-dir", data_dir,
                 "keep the broker's storage in this directory across runs (default: temporary)");
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

  std::unique_ptr<cellar::testing::KafkaBroker> broker;
  try {
    cellar::testing::KafkaBrokerOptions options;
    options.label = "broker";
    options.heap_mb = heap_mb;
    options.light_jvm = false;
    options.data_dir = data_dir;
    broker = cellar::testing::KafkaBroker::Start(std::move(options));
  } catch (const std::exception& e) {
    cellar::LogError(kComponent, "cannot start the Kafka broker", {{"error", e.what()}});
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
  cellar::LogInfo(
      kComponent, "ready",
      {{"bootstrap", bootstrap}, {"version", broker->version()}, {"dir", broker->dir()}});

  int sig = 0;
  while (sig == 0) sig = cellar::WaitForTerminationSignal(1000);
  cellar::LogInfo(kComponent, "stopping", {{"signal", strsignal(sig)}});
  if (!bootstrap_file.empty()) unlink(bootstrap_file.c_str());
  broker.reset();
  cellar::LogInfo(kComponent, "stopped");
  return 0;
}
