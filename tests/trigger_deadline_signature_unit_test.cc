// Unit tests of the handler deadline (triggers/internal/deadline_caller.h,
// triggers/internal/call_watchdog.h) and of Standard Webhooks signatures
// (triggers/webhook_signature.h). Part of the triggers_unit_test binary.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testing/wait_for.h"
#include "triggers/internal/call_watchdog.h"
#include "triggers/internal/deadline_caller.h"
#include "triggers/webhook_signature.h"

namespace cellar {
namespace {

using namespace std::chrono_literals;
using ::cellar::testing::WaitFor;

// ---------------------------------------------------------------------------
// Standard Webhooks signatures (triggers/webhook_signature.h)

// The example of the Standard Webhooks specification and its reference
// libraries' tests (the Python library signs it the same way).
constexpr char kSpecSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kSpecId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kSpecTimestamp = 1614265330;
constexpr char kSpecBody[] = R"({"test": 2432232314})";
constexpr char kSpecSignature[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

TEST(WebhookSignatureTest, SignsTheSpecificationsExample) {
  Result<std::string> key = DecodeWebhookSecret(kSpecSecret);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(kSpecSignature, SignWebhook({*key}, kSpecId, kSpecTimestamp, kSpecBody));
  // Without the prefix too, as the reference verifiers take it.
  Result<std::string> bare = DecodeWebhookSecret(std::string(kSpecSecret).substr(6));
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(*key, *bare);
}

TEST(WebhookSignatureTest, TwoKeysSignTwiceAndEitherVerifies) {
  const std::string a = *DecodeWebhookSecret(kSpecSecret);
  const std::string b = *DecodeWebhookSecret("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
  const std::string both = SignWebhook({a, b}, kSpecId, kSpecTimestamp, kSpecBody);
  EXPECT_EQ(0u, both.find(std::string(kSpecSignature) + " v1,")) << both;
  EXPECT_TRUE(VerifyWebhook({a}, kSpecId, "1614265330", both, kSpecBody, kSpecTimestamp).ok());
  EXPECT_TRUE(VerifyWebhook({b}, kSpecId, "1614265330", both, kSpecBody, kSpecTimestamp).ok());
}

TEST(WebhookSignatureTest, VerifyRefusesATamperedBodyAStaleTimestampAndAnotherKey) {
  const std::string key = *DecodeWebhookSecret(kSpecSecret);
  auto verify = [&](std::string_view body, int64_t now, std::string_view ts = "1614265330") {
    return VerifyWebhook({key}, kSpecId, ts, kSpecSignature, body, now);
  };
  EXPECT_TRUE(verify(kSpecBody, kSpecTimestamp + 299).ok());
  const Status tampered = verify(R"({"test": 2432232315})", kSpecTimestamp);
  EXPECT_EQ(StatusCode::kInvalidArgument, tampered.code());
  EXPECT_NE(std::string::npos, tampered.message().find("no webhook-signature matches"));
  const Status stale = verify(kSpecBody, kSpecTimestamp + 301);
  EXPECT_NE(std::string::npos, stale.message().find("too old")) << stale.ToString();
  const Status early = verify(kSpecBody, kSpecTimestamp - 301);
  EXPECT_NE(std::string::npos, early.message().find("too new")) << early.ToString();
  EXPECT_FALSE(verify(kSpecBody, kSpecTimestamp, "1614265331").ok()) << "timestamp is signed";
  EXPECT_FALSE(verify(kSpecBody, kSpecTimestamp, "soon").ok());
  const std::string other =
      *DecodeWebhookSecret("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
  EXPECT_FALSE(
      VerifyWebhook({other}, kSpecId, "1614265330", kSpecSignature, kSpecBody, kSpecTimestamp)
          .ok());
  EXPECT_FALSE(VerifyWebhook({key}, kSpecId, "", kSpecSignature, kSpecBody, kSpecTimestamp).ok());
}

TEST(WebhookSignatureTest, BadSecretsAreRefusedNamingTheSourceNotTheValue) {
  EXPECT_FALSE(DecodeWebhookSecret("whsec_not base64!").ok());
  EXPECT_FALSE(DecodeWebhookSecret("whsec_c2hvcnQ=").ok()) << "5 bytes is too short a key";
  ::unsetenv("CELLAR_UNIT_NO_SUCH_SECRET");
  auto unset = LoadWebhookSecrets({{"CELLAR_UNIT_NO_SUCH_SECRET", ""}});
  ASSERT_FALSE(unset.ok());
  EXPECT_NE(std::string::npos, unset.status().message().find("CELLAR_UNIT_NO_SUCH_SECRET"));
  ::setenv("CELLAR_UNIT_BAD_SECRET", "whsec_hunter2hunter2", 1);
  auto bad = LoadWebhookSecrets({{"CELLAR_UNIT_BAD_SECRET", ""}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string::npos, bad.status().message().find("env CELLAR_UNIT_BAD_SECRET"));
  EXPECT_EQ(std::string::npos, bad.status().message().find("hunter2")) << "the value leaked";
  auto missing = LoadWebhookSecrets({{"", "/nonexistent/cellar.secret"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string::npos, missing.status().message().find("/nonexistent/cellar.secret"));
  ::setenv("CELLAR_UNIT_GOOD_SECRET", (std::string(kSpecSecret) + "\n").c_str(), 1);
  auto good = LoadWebhookSecrets({{"CELLAR_UNIT_GOOD_SECRET", ""}});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(1u, good->size());
}

// ---------------------------------------------------------------------------
// DeadlineCaller (triggers/internal/deadline_caller.h)

TEST(DeadlineCallerTest, ReturnsTheCallsStatusAndWhatItThrew) {
  internal::DeadlineCaller caller("test-call");
  EXPECT_TRUE(caller.Call([] { return Status::Ok(); }, 10000).ok());
  Status failed = caller.Call([] { return Unavailable("backend down"); }, 10000);
  EXPECT_EQ(StatusCode::kUnavailable, failed.code());
  EXPECT_EQ("backend down", failed.message());
  Status threw = caller.Call([]() -> Status { throw std::runtime_error("boom"); }, 10000);
  EXPECT_EQ(StatusCode::kInternal, threw.code());
  EXPECT_NE(std::string::npos, threw.message().find("boom")) << threw.ToString();
  EXPECT_EQ(1u, caller.threads()) << "sequential calls reuse one thread";
}

TEST(DeadlineCallerTest, ACallPastItsDeadlineRunsOnWhileLaterCallsGetOtherThreads) {
  internal::DeadlineCaller caller("test-call");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> returned{false};
  Status late = caller.Call(
      [released, &returned] {
        released.wait();
        returned = true;
        return Status::Ok();
      },
      50);
  EXPECT_EQ(StatusCode::kDeadlineExceeded, late.code()) << late.ToString();
  EXPECT_NE(std::string::npos, late.message().find("within 50 ms")) << late.ToString();
  EXPECT_EQ(1u, caller.running_past_deadline());
  // The hung call holds its thread; the next calls do not wait behind it.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(caller.Call([] { return Status::Ok(); }, 10000).ok());
  EXPECT_EQ(2u, caller.threads());
  EXPECT_FALSE(returned.load());
  release.set_value();
  EXPECT_TRUE(WaitFor([&] { return caller.running_past_deadline() == 0; }, 10s));
  EXPECT_TRUE(returned.load());
  EXPECT_TRUE(caller.Call([] { return Status::Ok(); }, 10000).ok());
  EXPECT_EQ(2u, caller.threads()) << "the released thread is reused";
}

// ---------------------------------------------------------------------------
// CallWatchdog (triggers/internal/call_watchdog.h)

TEST(CallWatchdogTest, ACallDisarmedInTimeNeverFires) {
  internal::CallWatchdog watchdog("test-watch", 200);
  std::atomic<int> fired{0};
  for (int i = 0; i < 100; ++i) {
    const uint64_t id = watchdog.Arm([&] { ++fired; });
    EXPECT_TRUE(watchdog.Disarm(id));
  }
  // Two whole timeouts: anything armed above is past its deadline by then.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(fired.load(), 0);
}

// A call still running at its deadline: the action runs on the watchdog's
// thread, in deadline order, and Disarm answers false only once it returned.
TEST(CallWatchdogTest, ACallPastItsDeadlineFiresOnceAndDisarmWaitsForTheAction) {
  internal::CallWatchdog watchdog("test-watch", 50);
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> action_returned{false};
  const auto armed_at = std::chrono::steady_clock::now();
  const uint64_t first = watchdog.Arm([&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(1);
    }
    entered.set_value();
    released.wait();
    action_returned = true;
  });
  const uint64_t second = watchdog.Arm([&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
  });
  entered.get_future().wait();
  EXPECT_GE(std::chrono::steady_clock::now() - armed_at, 50ms) << "fired before its deadline";
  std::atomic<bool> disarmed{false}, disarm_result{true};
  std::thread caller([&] {
    disarm_result = watchdog.Disarm(first);
    disarmed = true;
  });
  EXPECT_FALSE(WaitFor([&] { return disarmed.load(); }, 100ms))
      << "Disarm returned while the action still ran";
  release.set_value();
  caller.join();
  EXPECT_TRUE(action_returned.load());
  EXPECT_FALSE(disarm_result.load());
  EXPECT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return order.size() == 2;
      },
      5s));
  EXPECT_FALSE(watchdog.Disarm(second)) << "it fired";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace cellar
