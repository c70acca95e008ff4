// Every long-running Cellar process's /metrics passes `promtool check metrics`
// (Debian's prometheus package; scripts/install-deps): cellard, cellar-relay,
// cellar-trigger, cellar-indexer and cellar-billing are started as processes
// against a private MariaDB and the local broker, written to, scraped once
// they handled the writes, and each scrape is piped into promtool, which fails
// the test on any parse error or lint problem (HELP/TYPE, counters ending in
// _total, units in names, duplicate series). cellar-broker serves no metrics.
// Every metric the alerting rules (deploy/prometheus) and the Grafana
// dashboard (deploy/grafana) name must be among those served.
#include <httplib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "client/cellar_client.h"
#include "gtest/gtest.h"
#include "testing/test_certificates.h"
#include "testing/test_cluster.h"
#include "testing/webhook_sink.h"
#include "tests/http_test_util.h"
#include "tests/trigger_test_util.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;

struct PromtoolResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// `promtool check metrics` with `text` on its stdin.
PromtoolResult Promtool(const std::string& text, const testing::TempDir& dir,
                        const std::string& name) {
  const std::string in = dir.File(name + ".prom");
  std::ofstream(in) << text;
  const std::string cmd = std::string(PROMTOOL_BIN) + " check metrics < " + in + " 2>&1";
  PromtoolResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A metrics flag on a free port, and its scrape.
struct Endpoint {
  int port = FreePort();
  std::vector<std::string> Flag() const {
    return {"--metrics-address", "127.0.0.1:" + std::to_string(port)};
  }
  std::string Scrape() const { return HttpGet(port, "/metrics"); }
};

std::vector<std::string> Args(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(MetricsPromtoolTest, EveryProcessMetricsPassPromtoolCheck) {
  // promtool itself catches what it should: a counter without _total.
  testing::TempDir dir("promtool");
  const PromtoolResult bad = Promtool(
      "# HELP cellar_bad_count A counter\n# TYPE cellar_bad_count counter\ncellar_bad_count 1\n",
      dir, "bad");
  ASSERT_NE(bad.exit_code, 0) << "promtool accepted a counter without _total: " << bad.output;

  auto c = MakeCluster("prom", Broker());
  ASSERT_TRUE(c);
  auto sink =
      testing::WebhookSink::Start([](const std::string&, const std::string&) { return 200; });
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  const std::string triggers_path = testing::WriteTempFile(
      "triggers:\n"
      "  - name: hook\n"
      "    datastore: trips\n"
      "    column: BASE\n"
      "    webhook: { url: \"" +
          (*sink)->Url("/hook") + "\", timeout_ms: 5000 }\n",
      ".yaml");

  const Endpoint relay_m, trigger_m, indexer_m, billing_m;
  ChildProcess relay(Args({CELLAR_RELAY_BIN, "--config", c->config_path}, relay_m.Flag()),
                     dir.File("relay.log"));
  ChildProcess trigger(
      Args({CELLAR_TRIGGER_BIN, "--config", c->config_path, "--triggers", triggers_path},
           trigger_m.Flag()),
      dir.File("trigger.log"));
  ChildProcess indexer(Args({CELLAR_INDEXER_BIN, "--config", c->config_path, "--indexes",
                             std::string(CELLAR_SOURCE_DIR) + "/config/examples/indexes"},
                            indexer_m.Flag()),
                       dir.File("indexer.log"));
  ChildProcess billing(Args({CELLAR_BILLING_BIN, "--config", c->config_path}, billing_m.Flag()),
                       dir.File("billing.log"));
  // cellard serves HTTPS (its certificate's expiry is a metric) and runs the
  // background purge (its metrics), so every series an alert or the
  // dashboard names is served.
  ASSERT_TRUE(testing::MakeTestCa(dir, "ca").ok());
  ASSERT_TRUE(testing::MakeTestCertificate(dir, "node", "ca", "IP:127.0.0.1").ok());
  const std::string node_config =
      testing::WriteTempFile(c->yaml + "purge:\n  interval: 1h\n", ".yaml");
  auto cellard = testing::CellardProcess::Start(
      node_config, {"--tls-cert", dir.File("node.pem"), "--tls-key", dir.File("node-key.pem")});
  ASSERT_TRUE(cellard);
  auto scrape_node = [&] {
    httplib::SSLClient https("127.0.0.1", cellard->port());
    https.set_ca_cert_path(dir.File("ca.pem").c_str());
    auto r = https.Get("/metrics");
    return r && r->status == 200 ? r->body : std::string();
  };
  for (ChildProcess* p : {&relay, &trigger, &indexer, &billing}) ASSERT_TRUE(p->running());

  // Writes through the worker node (its request metrics) of trips an index
  // and the triggers take.
  ClientOptions o;
  o.endpoints = {cellard->url()};
  o.ca_cert_file = dir.File("ca.pem");
  auto client = Client::Create(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  constexpr int kTrips = 20;
  for (const Uuid& row : NewRows(kTrips)) {
    auto r = (*client)->Put("trips", CellWrite{row,
                                               "BASE",
                                               0,
                                               {{"driver_partner_uuid", Uuid::Random().ToString()},
                                                {"city_uuid", Uuid::Random().ToString()},
                                                {"status", "completed"},
                                                {"fare", {{"total", 12.5}}}}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  struct Scraped {
    std::string name;
    std::function<std::string()> scrape;
    std::string metric;  // present with a value >= want once the writes were handled
    std::map<std::string, std::string> labels;
    double want;
    const ChildProcess* child;
  };
  const std::vector<Scraped> all = {
      {"cellar-relay",
       [&] { return relay_m.Scrape(); },
       "cellar_relay_events_published_total",
       {{"datastore", "trips"}},
       kTrips + 0.0,
       &relay},
      {"cellar-trigger",
       [&] { return trigger_m.Scrape(); },
       "cellar_trigger_handled_total",
       {{"trigger", "hook"}},
       kTrips + 0.0,
       &trigger},
      {"cellar-indexer",
       [&] { return indexer_m.Scrape(); },
       "cellar_index_applied_total",
       {},
       kTrips + 0.0,
       &indexer},
      {"cellar-billing",
       [&] { return billing_m.Scrape(); },
       "cellar_trigger_handled_total",
       {{"trigger", "billing"}},
       kTrips + 0.0,
       &billing},
      {"cellard", scrape_node, "cellar_http_requests_total", {}, kTrips + 0.0, nullptr},
  };
  std::set<std::string> served;  // every metric family some process serves
  for (const Scraped& s : all) {
    std::string text;
    EXPECT_TRUE(WaitFor(
        [&] {
          text = s.scrape();
          return MetricValue(text, s.metric, s.labels) >= s.want;
        },
        60s, 100ms))
        << s.name << " did not report " << s.metric << " >= " << s.want << ":\n"
        << text << "\n"
        << (s.child ? s.child->Log() : "");
    ASSERT_FALSE(text.empty()) << s.name;
    const PromtoolResult r = Promtool(text, dir, s.name);
    EXPECT_EQ(r.exit_code, 0) << s.name << ": promtool check metrics:\n" << r.output;
    EXPECT_EQ(r.output, "") << s.name << ": promtool check metrics:\n" << r.output;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("# TYPE ", 0) == 0) served.insert(line.substr(7, line.find(' ', 7) - 7));
  }

  // Every metric an alerting rule (deploy/prometheus) or the dashboard
  // (deploy/grafana) names is one of them: a renamed metric fails here, not
  // silently in someone's Prometheus.
  for (const char* file :
       {"/deploy/prometheus/cellar-alerts.yml", "/deploy/grafana/cellar-dashboard.json"}) {
    std::ifstream in(std::string(CELLAR_SOURCE_DIR) + file);
    ASSERT_TRUE(in) << file;
    std::set<std::string> named;
    static const std::regex kName("cellar_[a-z0-9_]+");
    for (std::string line; std::getline(in, line);) {
      if (line.find_first_not_of(' ') != std::string::npos &&
          line[line.find_first_not_of(' ')] == '#')
        continue;  // a YAML comment
      for (std::sregex_iterator m(line.begin(), line.end(), kName), end; m != end; ++m)
        named.insert(m->str());
    }
    EXPECT_GE(named.size(), 10u) << file;
    for (std::string name : named) {
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (name.size() > std::strlen(suffix) &&
            name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0 &&
            served.count(name.substr(0, name.size() - std::strlen(suffix))))
          name = name.substr(0, name.size() - std::strlen(suffix));
      EXPECT_TRUE(served.count(name)) << file << " names " << name << ", which no process serves";
    }
  }

  EXPECT_EQ(cellard->Stop(), 0);
  for (ChildProcess* p : {&billing, &indexer, &trigger, &relay})
    EXPECT_EQ(p->Terminate(30s), 0) << p->Log();
}

}  // namespace
}  // namespace cellar::trigtest
