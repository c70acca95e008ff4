// Signed webhooks (triggers/webhook_signature.h) checked by a verifier
// nobody here wrote: Standard Webhooks' reference Python library
// (`standardwebhooks` from PyPI, tests/standard_webhooks_receiver.py)
// verifies real deliveries of single and batch triggers signed with two keys
// during a rotation, and refuses them with a changed body or replayed ten
// minutes later; cellar-webhook-sink verifies too and answers 401 to another
// key's signature (set aside at once); deliveries over HTTPS are checked
// against the trigger's CA file. Part of the webhook_test binary.
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_certificates.h"
#include "tests/trigger_test_util.h"
#include "triggers/trigger_admin.h"
#include "triggers/trigger_config.h"

namespace cellar::trigtest {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kPython[] = CELLAR_SOURCE_DIR "/.deps/venv/bin/python";
constexpr char kReceiver[] = CELLAR_SOURCE_DIR "/tests/standard_webhooks_receiver.py";
// Test keys: the specification's example, and 32 bytes 0..31.
constexpr char kOldSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kNewSecret[] = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
constexpr char kOldEnv[] = "CELLAR_TEST_HOOK_OLD_SECRET";
constexpr char kNewEnv[] = "CELLAR_TEST_HOOK_NEW_SECRET";

// The "host:port" a child wrote to `ready` ("" when it did not within 20 s).
std::string AddressOf(const std::string& ready, ChildProcess& child) {
  std::string address;
  const bool written = WaitFor(
      [&] {
        std::ifstream in(ready);
        return static_cast<bool>(std::getline(in, address)) && !address.empty();
      },
      20s);
  EXPECT_TRUE(written) << child.Log();
  return written ? address : "";
}

// The receiver's lines, one per delivery.
std::vector<json> Deliveries(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (auto j = json::parse(line, nullptr, false); !j.is_discarded()) out.push_back(j);
  return out;
}

size_t EventsTo(const std::vector<json>& deliveries, const std::string& path) {
  size_t n = 0;
  for (const json& d : deliveries)
    if (d.value("path", "") == path) n += d.value("events", 0);
  return n;
}

std::string Trigger(const std::string& name, const std::string& url, const std::string& extra) {
  return "  - name: " + name +
         "\n    datastore: trips\n    column: BASE\n"
         "    retry: { max_attempts: 2, initial_backoff_ms: 10, max_backoff_ms: 40 }\n"
         "    webhook:\n      url: \"" +
         url + "\"\n" + extra;
}

class WebhookSignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, ::setenv(kOldEnv, kOldSecret, 1));
    ASSERT_EQ(0, ::setenv(kNewEnv, kNewSecret, 1));
    std::ofstream(dir_.File("new.secret")) << kNewSecret << "\n";
  }

  // The reference receiver (its key the old and the new secret), HTTPS when
  // given a certificate made in dir_.
  std::unique_ptr<ChildProcess> StartReceiver(const std::string& cert_name = "") {
    std::vector<std::string> args = {kPython,        kReceiver, "--ready-file", ready_,
                                     "--out",        out_,      "--secret-env", kOldEnv,
                                     "--secret-env", kNewEnv};
    if (!cert_name.empty())
      args.insert(args.end(), {"--cert", dir_.File(cert_name + ".pem"), "--key",
                               dir_.File(cert_name + "-key.pem")});
    auto child = std::make_unique<ChildProcess>(args, dir_.File("receiver.log"));
    EXPECT_TRUE(child->running());
    return child;
  }

  // Runs `triggers` (YAML list items) until `done` holds, with 12 cells put.
  void Run(const std::string& prefix, const std::string& triggers,
           const std::function<bool()>& done, const std::string& what) {
    auto c = MakeCluster(prefix, Broker());
    ASSERT_TRUE(c);
    auto defs = ParseTriggerDefinitions("triggers:\n" + triggers, "hooks.yaml", c->config);
    ASSERT_TRUE(defs.ok()) << defs.status().ToString();
    auto relay = StartRelay(c->store.get(), prefix + "-relay");
    ASSERT_TRUE(relay);
    worker_ = std::make_unique<TriggerWorker>(c->config, Opts(prefix));
    for (const auto& d : *defs) ASSERT_EQ("OK", worker_->on_webhook(d).ToString());
    ASSERT_TRUE(worker_->Start().ok());
    PutVersion(*c->store, NewRows(kCells), "BASE", 0, [](size_t i) { return json{{"n", i}}; });
    EXPECT_TRUE(WaitFor(done, 60s)) << what;
    config_ = c->config;
    worker_->Stop();
    relay->Stop();
  }

  static constexpr size_t kCells = 12;
  testing::TempDir dir_{"signed-hooks"};
  const std::string ready_ = dir_.File("ready"), out_ = dir_.File("deliveries.jsonl");
  std::unique_ptr<TriggerWorker> worker_;
  ClusterConfig config_;
};

TEST_F(WebhookSignatureTest, TheReferenceVerifierAcceptsDeliveriesSignedDuringARotation) {
  auto receiver = StartReceiver();
  const std::string address = AddressOf(ready_, *receiver);
  ASSERT_FALSE(address.empty());
  const std::string secrets = "      secrets: [ { env: " + std::string(kOldEnv) +
                              " }, { file: " + dir_.File("new.secret") + " } ]\n";
  Run(
      "tg_signed",
      Trigger("hook_one", "http://" + address + "/one", secrets) +
          Trigger("hook_batch", "http://" + address + "/batch",
                  secrets + "      batch_size: 5\n      batch_window_ms: 50\n"),
      [&] {
        const auto d = Deliveries(out_);
        return EventsTo(d, "/one") >= kCells && EventsTo(d, "/batch") >= kCells;
      },
      "not every event was delivered to both paths");
  const std::vector<json> deliveries = Deliveries(out_);
  std::set<std::string> ids;
  for (const json& d : deliveries) {
    SCOPED_TRACE(d.dump());
    EXPECT_EQ(json::array({true, true}), d["verified_by"]) << "each key's signature verifies";
    EXPECT_TRUE(d.value("tampered_rejected", false));
    EXPECT_TRUE(d.value("stale_rejected", false));
    ASSERT_TRUE(d["id"].is_string());
    EXPECT_TRUE(ids.insert(d.value("path", "") + d["id"].get<std::string>()).second)
        << "webhook-id repeated within a path";
  }
  EXPECT_EQ(kCells, EventsTo(deliveries, "/one")) << "each event once";
  EXPECT_EQ(kCells, EventsTo(deliveries, "/batch"));
  EXPECT_EQ(0, receiver->Terminate(10s)) << receiver->Log();
}

TEST_F(WebhookSignatureTest, TheSinkRefusesAnotherKeysSignatureAndTheEventIsSetAside) {
  ChildProcess sink({CELLAR_WEBHOOK_SINK_BIN, "--out", dir_.File("events.jsonl"), "--ready-file",
                     ready_, "--secret-env", kNewEnv},
                    dir_.File("sink.log"));
  const std::string address = AddressOf(ready_, sink);
  ASSERT_FALSE(address.empty());
  auto count = [&](const std::string& what) {
    const std::string text = HttpGet(std::stoi(address.substr(address.rfind(':') + 1)), what);
    return text.empty() ? -1L : std::stol(text);
  };
  Run(
      "tg_sinksig",
      Trigger("hook_right", "http://" + address + "/right",
              "      secrets: [ { env: " + std::string(kNewEnv) + " } ]\n") +
          Trigger("hook_wrong", "http://" + address + "/wrong",
                  "      secrets: [ { env: " + std::string(kOldEnv) + " } ]\n"),
      [&] {
        return count("/count") >= static_cast<long>(kCells) &&
               count("/rejected") >= static_cast<long>(kCells) &&
               Totals(*worker_, "hook_wrong").set_aside >= kCells;
      },
      "deliveries: " + std::to_string(count("/count")) + " recorded, " +
          std::to_string(count("/rejected")) + " rejected");
  EXPECT_EQ(static_cast<long>(kCells), count("/count"));
  EXPECT_EQ(static_cast<long>(kCells), count("/rejected")) << "401 is set aside at once";
  auto dead = ListDeadLetters(config_, "trips", "hook_wrong");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(kCells, dead->size());
  EXPECT_THAT(dead->front().error, HasSubstr("answered 401"));
  EXPECT_EQ(0, sink.Terminate(10s)) << sink.Log();
}

TEST_F(WebhookSignatureTest, HttpsDeliveriesAreCheckedAgainstTheTriggersCaFile) {
  ASSERT_TRUE(testing::MakeTestCa(dir_, "ca").ok());
  ASSERT_TRUE(testing::MakeTestCertificate(dir_, "server", "ca", "IP:127.0.0.1").ok());
  ASSERT_TRUE(testing::MakeTestCa(dir_, "other_ca").ok());
  auto receiver = StartReceiver("server");
  const std::string address = AddressOf(ready_, *receiver);
  ASSERT_FALSE(address.empty());
  const std::string secrets = "      secrets: [ { env: " + std::string(kNewEnv) + " } ]\n";
  Run(
      "tg_tlshook",
      Trigger("hook_tls", "https://" + address + "/tls",
              secrets + "      ca_file: " + dir_.File("ca.pem") + "\n") +
          Trigger("hook_untrusted", "https://" + address + "/untrusted",
                  secrets + "      ca_file: " + dir_.File("other_ca.pem") + "\n"),
      [&] {
        return EventsTo(Deliveries(out_), "/tls") >= kCells &&
               Totals(*worker_, "hook_untrusted").set_aside >= kCells;
      },
      "https deliveries: " + std::to_string(EventsTo(Deliveries(out_), "/tls")));
  const std::vector<json> deliveries = Deliveries(out_);
  EXPECT_EQ(kCells, EventsTo(deliveries, "/tls"));
  EXPECT_EQ(0u, EventsTo(deliveries, "/untrusted")) << "a certificate of another CA was accepted";
  for (const json& d : deliveries) EXPECT_EQ(json::array({false, true}), d["verified_by"]);
  auto dead = ListDeadLetters(config_, "trips", "hook_untrusted");
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_FALSE(dead->empty());
  EXPECT_THAT(dead->front().error, HasSubstr("SSL"));
  EXPECT_EQ(0, receiver->Terminate(10s)) << receiver->Log();
}

}  // namespace
}  // namespace cellar::trigtest
