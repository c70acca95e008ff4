// MetricsEndpoint (server/metrics_endpoint.h): serves exactly what its
// registry holds, on a port it picked, and refuses addresses it cannot use.
#include "server/metrics_endpoint.h"

#include <httplib.h>

#include "gtest/gtest.h"
#include "testing/metric_value.h"
#include "testing/status_printing.h"

namespace cellar {
namespace {

using ::cellar::testing::MetricValue;

TEST(MetricsEndpointTest, ServesWhatTheRegistryHolds) {
  MetricsRegistry registry;
  registry.GetCounter("cellar_test_events_total", "Test events", {{"kind", "a"}}).Increment(3);
  auto endpoint = MetricsEndpoint::Start(&registry, "127.0.0.1:0");
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().ToString();
  const int port = (*endpoint)->port();
  ASSERT_GT(port, 0);

  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  EXPECT_EQ(res->body, registry.Render());
  EXPECT_EQ(MetricValue(res->body, "cellar_test_events_total", {{"kind", "a"}}), 3) << res->body;

  // What is registered or changed later is served at the next scrape.
  registry.GetGauge("cellar_test_depth", "Test depth").Set(2.5);
  registry.GetCounter("cellar_test_events_total", "Test events", {{"kind", "a"}}).Increment();
  res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->body, registry.Render());
  EXPECT_EQ(MetricValue(res->body, "cellar_test_events_total", {{"kind", "a"}}), 4) << res->body;
  EXPECT_EQ(MetricValue(res->body, "cellar_test_depth"), 2.5) << res->body;

  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/v1/anything");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  (*endpoint)->Stop();
  (*endpoint)->Stop();  // idempotent
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1, 0);
  EXPECT_FALSE(after.Get("/metrics")) << "still served after Stop()";
}

TEST(MetricsEndpointTest, RefusesAddressesThatAreNotHostAndPort) {
  MetricsRegistry registry;
  for (const char* bad : {"", "localhost", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:9464x",
                          "127.0.0.1:-1", "127.0.0.1:70000", ":9464"}) {
    auto e = MetricsEndpoint::Start(&registry, bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument)
        << bad << ": " << e.status().ToString();
  }
  auto e = MetricsEndpoint::Start(&registry, "192.0.2.1:0");  // not an address of this machine
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable) << e.status().ToString();
}

}  // namespace
}  // namespace cellar
