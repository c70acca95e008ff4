// The whole local stack, started as the README's first command does
// (scripts/up, with the binaries of this build): 1,000 trips written through
// the HTTP worker nodes must be billed exactly once in effect, reach the
// webhook when its filter admits them, be answered by the index per driver,
// leave every dead-letter topic empty, and survive a stop and restart of the
// whole stack; and the README's tutorials, run against that stack.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "changelog/kafka/consumer_group_lag.h"
#include "client/cellar_client.h"
#include "testing/child_process.h"
#include "testing/test_cluster.h"
#include "testing/wait_for.h"
#include "triggers/dead_letter.h"

namespace cellar {
namespace {

using namespace std::chrono_literals;

using ::cellar::testing::WaitFor;

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// scripts/up as a child process; Stop() sends SIGTERM (its Ctrl-C path).
class LocalStack {
 public:
  explicit LocalStack(std::string state) : state_(std::move(state)) {}
  ~LocalStack() {
    Stop();
    for (const char* db : {"mariadb-1", "mariadb-2"}) {  // in case up was killed
      std::string cmd = std::string(CELLAR_SOURCE_DIR) + "/scripts/local-mariadb stop " + state_ +
                        "/" + db + " >/dev/null 2>&1";
      int rc = std::system(cmd.c_str());
      (void)rc;
    }
  }

  // Starts scripts/up and waits until it wrote stack.env.
  bool Start() {
    std::filesystem::remove(state_ + "/stack.env");
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      setenv("CELLAR_STATE_DIR", state_.c_str(), 1);
      setenv("CELLAR_BUILD_DIR", CELLAR_BUILD_DIR, 1);
      setenv("CELLAR_SKIP_BUILD", "1", 1);
      setenv("CELLAR_UP_DEMO", "0", 1);
      setenv("CELLAR_UP_FOLLOW", "0", 1);
      std::filesystem::create_directories(state_);
      FILE* log = std::fopen((state_ + "/up.log").c_str(), "a");
      if (log) {
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
      }
      const std::string up = std::string(CELLAR_SOURCE_DIR) + "/scripts/up";
      execl("/bin/bash", "bash", up.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const bool ready = WaitFor(
        [&] {
          int status;
          if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return true;  // exited early: reported below
          }
          return ReadEnvFile(state_ + "/stack.env").count("CELLAR_WEBHOOK_DELIVERIES") > 0;
        },
        180s);
    env_ = ReadEnvFile(state_ + "/stack.env");
    return ready && pid_ > 0 && env_.count("CELLAR_NODE1");
  }

  // SIGTERM to scripts/up, which stops every service and both servers.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    const bool exited = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 120s);
    if (!exited) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

  std::string Log() const {
    std::ifstream in(state_ + "/up.log");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
  }
  const std::map<std::string, std::string>& env() const { return env_; }

 private:
  std::string state_;
  pid_t pid_ = -1;
  std::map<std::string, std::string> env_;
};

struct Trip {
  Uuid row;
  std::string driver;
  std::string city;
  double fare = 0;
};

std::vector<Trip> MakeTrips(int n, std::mt19937& rng, const std::vector<std::string>& drivers,
                            const std::vector<std::string>& cities) {
  std::vector<Trip> out;
  for (int i = 0; i < n; ++i) {
    Trip t;
    t.row = Uuid::Random();
    t.driver = drivers[rng() % drivers.size()];
    t.city = cities[rng() % cities.size()];
    t.fare = rng() % 4 == 0 ? 0 : 5 + static_cast<double>(rng() % 50);  // a quarter are free
    out.push_back(t);
  }
  return out;
}

nlohmann::json TripBody(const Trip& t, int i) {
  return {{"driver_partner_uuid", t.driver},
          {"city_uuid", t.city},
          {"trip_created_at", FormatRfc3339(NowMicros() - int64_t{i} * 1000000)},
          {"fare", {{"total", t.fare}, {"currency", "USD"}}},
          {"status", "completed"}};
}

// Rows of distinct webhook deliveries so far.
std::set<std::string> DeliveredRows(const std::string& path) {
  std::set<std::string> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("row_key") && j["row_key"].is_string())
      rows.insert(j["row_key"].get<std::string>());
  }
  return rows;
}

class SystemTest : public ::testing::Test {
 protected:
  void WriteAll(Client& client, const std::vector<Trip>& trips) {
    for (size_t i = 0; i < trips.size(); ++i) {
      auto r = client.Put("trips", CellWrite{trips[i].row, "BASE", 1, TripBody(trips[i], i)});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }

  // Every trip has exactly one STATUS version, with the state billing decides.
  void ExpectBilledOnce(Client& client, const std::vector<Trip>& trips) {
    std::vector<const Trip*> waiting;
    for (const auto& t : trips) waiting.push_back(&t);
    ASSERT_TRUE(WaitFor(
        [&] {
          std::vector<const Trip*> still;
          for (const Trip* t : waiting)
            if (!client.Latest("trips", t->row, "STATUS").ok()) still.push_back(t);
          waiting.swap(still);
          return waiting.empty();
        },
        240s))
        << waiting.size() << " trips were never billed";
    for (const auto& t : trips) {
      VersionQuery q;
      q.limit = 10;
      auto v = client.Versions("trips", t.row, "STATUS", q);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      ASSERT_EQ(v->size(), 1u) << "trip " << t.row.ToString() << " billed more than once in effect";
      EXPECT_EQ((*v)[0].body.value("state", ""), t.fare > 0 ? "billed" : "free");
    }
  }
};

TEST_F(SystemTest, ThousandTripsThroughTheWholeStackAndARestart) {
  testing::TempDir dir("system");
  LocalStack stack(dir.path() + "/stack");
  ASSERT_TRUE(stack.Start()) << stack.Log();
  const auto& env = stack.env();

  ClientOptions copts;
  copts.endpoints = {"http://" + env.at("CELLAR_NODE1"), "http://" + env.at("CELLAR_NODE2")};
  auto client = Client::Create(copts);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  std::mt19937 rng(20261122);
  std::vector<std::string> drivers, cities;
  for (int i = 0; i < 20; ++i) drivers.push_back(Uuid::Random().ToString());
  for (int i = 0; i < 5; ++i) cities.push_back(Uuid::Random().ToString());
  std::vector<Trip> trips = MakeTrips(1000, rng, drivers, cities);
  WriteAll(**client, trips);

  // Billing: exactly once in effect, whatever the handler's re-runs.
  ExpectBilledOnce(**client, trips);

  // The webhook gets every event its filter (state = billed) admits, and no other.
  std::set<std::string> want_webhook;
  for (const auto& t : trips)
    if (t.fare > 0) want_webhook.insert(t.row.ToString());
  const std::string deliveries = env.at("CELLAR_WEBHOOK_DELIVERIES");
  EXPECT_TRUE(WaitFor([&] { return DeliveredRows(deliveries) == want_webhook; }, 120s))
      << DeliveredRows(deliveries).size() << " of " << want_webhook.size() << " delivered";

  // The index answers per driver, through the worker nodes' HTTP API: exactly
  // that driver's trips.
  auto cfg = LoadClusterConfig(env.at("CELLAR_CONFIG"));
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  for (const auto& driver : drivers) {
    std::set<std::string> want;
    for (const auto& t : trips)
      if (t.driver == driver) want.insert(t.row.ToString());
    std::set<std::string> got;
    std::string last_error;
    EXPECT_TRUE(WaitFor(
        [&] {
          got.clear();
          IndexQueryRequest q;
          q.shard_value = driver;
          q.limit = 1000;
          auto r = (*client)->QueryIndex("trips", "driver_partner_index", q);
          if (!r.ok()) {
            last_error = r.status().ToString();
            return false;
          }
          for (const auto& h : r->hits) got.insert(h.row_key.ToString());
          return got == want;
        },
        60s))
        << "driver " << driver << ": index has " << got.size() << " of " << want.size() << " "
        << last_error;
  }

  // Nothing was set aside.
  for (const char* trigger : {"billing", "status_audit", "billed_webhook"}) {
    auto n = TopicRecordCount(*cfg, DeadLetterTopic(cfg->kafka, "trips", trigger));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(*n, 0) << "dead letters of " << trigger;
  }

  // Stop and restart everything: no cell and no trigger effect is lost, and
  // re-delivered events (the broker starts empty; the relay republishes) change nothing.
  stack.Stop();
  ASSERT_TRUE(stack.Start()) << stack.Log();
  const auto& env2 = stack.env();
  copts.endpoints = {"http://" + env2.at("CELLAR_NODE1"), "http://" + env2.at("CELLAR_NODE2")};
  auto client2 = Client::Create(copts);
  ASSERT_TRUE(client2.ok());
  for (const auto& t : trips) {
    auto base = (*client2)->Get("trips", t.row, "BASE", 1);
    ASSERT_TRUE(base.ok()) << "lost " << t.row.ToString() << ": " << base.status().ToString();
  }
  std::vector<Trip> more = MakeTrips(100, rng, drivers, cities);
  WriteAll(**client2, more);
  ExpectBilledOnce(**client2, more);
  ExpectBilledOnce(**client2, trips);  // republished BASE events billed nothing twice
  for (const auto& t : more)
    if (t.fare > 0) want_webhook.insert(t.row.ToString());
  EXPECT_TRUE(WaitFor(
      [&] {
        auto got = DeliveredRows(env2.at("CELLAR_WEBHOOK_DELIVERIES"));
        return std::includes(got.begin(), got.end(), want_webhook.begin(), want_webhook.end());
      },
      120s));
  stack.Stop();
}

// The README's three tutorials, run as a reader would run them against the
// stack of `scripts/up` (tests/readme_tutorials.py): every command must print
// what the text says, and every code block quoting a file must be that file.
// The commands run in a directory that looks like the repository, where
// `.local` is this stack's state and `build` this build.
TEST(ReadmeTutorialTest, EveryCommandPrintsWhatTheReadmeSays) {
  testing::TempDir dir("readme");
  const std::string state = dir.path() + "/stack";
  LocalStack stack(state);
  ASSERT_TRUE(stack.Start()) << stack.Log();
  const std::string work = dir.path() + "/repo";
  std::filesystem::create_directories(work);
  for (const auto& entry : std::filesystem::directory_iterator(CELLAR_SOURCE_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name == ".local" || name == "build" || name == ".git") continue;
    std::filesystem::create_symlink(entry.path(), work + "/" + name);
  }
  std::filesystem::create_symlink(state, work + "/.local");
  std::filesystem::create_symlink(CELLAR_BUILD_DIR, work + "/build");
  std::string out, err;
  const int status =
      testing::RunCaptured({"python3", CELLAR_SOURCE_DIR "/tests/readme_tutorials.py", "--readme",
                            CELLAR_SOURCE_DIR "/README.md", "--workdir", work},
                           &out, &err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out << err << "\n" << stack.Log();
  std::cout << out;
  stack.Stop();
}

}  // namespace
}  // namespace cellar
