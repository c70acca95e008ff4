// Unit tests of base/: Status and Result, Uuid, RFC 3339 time and duration
// parsing, listening sockets.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/host_port.h"
#include "base/listening_sockets.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/number_text.h"
#include "base/status.h"
#include "base/thread_name.h"
#include "base/time.h"
#include "base/uuid.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_printing.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;

Result<int> Half(int n) {
  if (n % 2 != 0) return InvalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

Status Quarter(int n, int* out) {
  CELLAR_ASSIGN_OR_RETURN(const int half, Half(n));
  CELLAR_ASSIGN_OR_RETURN(*out, Half(half));
  return Status::Ok();
}

TEST(ResultTest, HoldsAValueOrAnError) {
  Result<int> ok = Half(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(4, *ok);
  EXPECT_TRUE(ok.status().ok());
  Result<int> bad = Half(3);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code());
  EXPECT_EQ("InvalidArgument: 3 is odd", bad.status().ToString());
  int out = 0;
  EXPECT_TRUE(Quarter(12, &out).ok());
  EXPECT_EQ(3, out);
  EXPECT_EQ("InvalidArgument: 3 is odd", Quarter(6, &out).ToString());
}

// In every build type, not only with assertions: an OK status has no value to
// hold, so the result is an error, and CELLAR_ASSIGN_OR_RETURN does not pass it
// on as success.
TEST(ResultTest, BuiltFromAnOkStatusIsInternal) {
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(StatusCode::kInternal, r.status().code());
  auto forward = [&]() -> Status {
    CELLAR_ASSIGN_OR_RETURN(int v, r);
    (void)v;
    return Status::Ok();
  };
  EXPECT_EQ(StatusCode::kInternal, forward().code());
}

// How many ValueWatch objects exist: a range-for over a temporary Result's
// value must iterate a live one (the README's trip-client loops over
// `client->Versions(...).value()`; ASan found it reading a destroyed vector).
int live_value_watches = 0;
struct ValueWatch {
  static constexpr int kItems[] = {1, 2, 3};
  ValueWatch() { ++live_value_watches; }
  ValueWatch(const ValueWatch&) { ++live_value_watches; }
  ValueWatch(ValueWatch&&) noexcept { ++live_value_watches; }
  ~ValueWatch() { --live_value_watches; }
  const int* begin() const { return kItems; }
  const int* end() const { return kItems + 3; }
};

Result<ValueWatch> WatchedValue() { return ValueWatch(); }

TEST(ResultTest, ARangeForOverATemporarysValueIteratesALiveValue) {
  static_assert(std::is_same_v<decltype(WatchedValue().value()), ValueWatch>,
                "value() of a temporary hands the value over, not a reference into it");
  int items = 0;
  for (int item : WatchedValue().value()) {
    EXPECT_EQ(1, live_value_watches) << "item " << item << " of a destroyed value";
    ++items;
  }
  EXPECT_EQ(3, items);
  EXPECT_EQ(0, live_value_watches);
}

TEST(ResultDeathTest, ValueOfAnErrorAbortsWithTheStatus) {
  Result<std::string> r = NotFound("no cell trips/x/BASE/1");
  EXPECT_DEATH((void)r.value(), "NotFound: no cell trips/x/BASE/1");
  EXPECT_DEATH((void)r->size(), "NotFound");
}

Uuid U(const std::string& text) {
  Result<Uuid> u = Uuid::Parse(text);
  EXPECT_TRUE(u.ok()) << u.status().ToString();
  return u.ok() ? *u : Uuid();
}

// ---------------------------------------------------------------------------
// Uuid

TEST(LogTest, EnabledFollowsTheLevel) {
  SetLogLevel(LogLevel::kWarn);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarn));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetLogLevel(LogLevel::kDebug);
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug));
  SetLogLevel(LogLevel::kInfo);
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
  EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
}

TEST(NumberTextTest, DecimalIntegersOnlyAndTheyMustFit) {
  EXPECT_EQ(ParseDecimalInteger<int64_t>("010"), 10);
  EXPECT_EQ(ParseDecimalInteger<int64_t>("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(ParseDecimalInteger<uint64_t>("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ParseDecimalInteger<int>("0"), 0);
  for (const char* bad :
       {"", "+5", " 5", "5 ", "0x10", "1e3", "1.0", "--1", "-", "9223372036854775808"})
    EXPECT_EQ(ParseDecimalInteger<int64_t>(bad), std::nullopt) << "'" << bad << "'";
  EXPECT_EQ(ParseDecimalInteger<uint64_t>("-1"), std::nullopt) << "no wrap-around";
  EXPECT_EQ(ParseDecimalInteger<uint32_t>("4294967296"), std::nullopt);
}

// DecimalText is what ParseDecimal* reads back: integers plainly, doubles in
// their shortest round-trip form.
TEST(NumberTextTest, DecimalTextIsTheShortestFormThatReadsBack) {
  EXPECT_EQ("-9223372036854775808", DecimalText(INT64_MIN));
  EXPECT_EQ("18446744073709551615", DecimalText(UINT64_MAX));
  EXPECT_EQ("0.1", DecimalText(0.1));
  EXPECT_EQ("1.5", DecimalText(1.5));
  EXPECT_EQ("1e+300", DecimalText(1e300));
  for (double v : {0.1, 1.0 / 3, -2.5e-300, 123456789.125})
    EXPECT_EQ(ParseDecimalDouble(DecimalText(v)), v) << DecimalText(v);
}

TEST(NumberTextTest, DecimalDoublesAreFiniteAndTellOverflowApart) {
  EXPECT_EQ(ParseDecimalDouble("1.5"), 1.5);
  EXPECT_EQ(ParseDecimalDouble(".5"), 0.5);
  EXPECT_EQ(ParseDecimalDouble("5."), 5.0);
  EXPECT_EQ(ParseDecimalDouble("-2e-3"), -2e-3);
  EXPECT_EQ(ParseDecimalDouble("1E2"), 100.0);
  EXPECT_EQ(ParseDecimalDouble("1e-400"), 0.0) << "underflow rounds towards zero, as JSON reads it";
  bool out_of_range = true;
  for (const char* bad : {"", "-", ".", "+1", " 1", "1 ", "inf", "-inf", "infinity", "nan", "NaN",
                          "0x10", "0x1p3", "1e", "1.5x", "--1", "e5"}) {
    EXPECT_EQ(ParseDecimalDouble(bad, &out_of_range), std::nullopt) << "'" << bad << "'";
    EXPECT_FALSE(out_of_range) << bad;
  }
  for (const std::string& huge :
       {std::string("1e400"), std::string("-1e400"), "1" + std::string(400, '0')}) {
    EXPECT_EQ(ParseDecimalDouble(huge, &out_of_range), std::nullopt) << huge;
    EXPECT_TRUE(out_of_range) << huge;
  }
}

// One reading of HOST:PORT for --listen and --metrics-address. Before, cellard
// kept an IPv6 literal's brackets and so could not listen on "[::1]:8080",
// and the webhook sink listened on ":8080" with an empty host.
TEST(HostPortTest, LastColonSplitsIpv6InBracketsPortDecimal) {
  auto hp = ParseHostPort("127.0.0.1:8080", "--listen");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  hp = ParseHostPort("[::1]:0", "--listen");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, 0);
  hp = ParseHostPort("localhost:065535", "--listen");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->port, 65535);
  for (const char* bad : {"", "localhost", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:80x",
                          "127.0.0.1:-1", "127.0.0.1:70000", "127.0.0.1:+80", "127.0.0.1:0x50",
                          ":8080", "[]:8080", "::1:8080", "[::1:8080", "::1]:8080"}) {
    auto r = ParseHostPort(bad, "--listen");
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), ::testing::StartsWith("--listen must be HOST:PORT"));
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("'" + std::string(bad) + "'"));
  }
  EXPECT_THAT(ParseHostPort("::1:8080", "--listen").status().message(),
              ::testing::HasSubstr("[::1]:8080"));
  EXPECT_EQ(FormatHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(FormatHostPort("::1", 80), "[::1]:80");
}

TEST(UuidTest, ParseAndFormat) {
  const Uuid u = U("00010203-0405-0607-0809-0a0b0c0d0e0f");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(i, u.bytes()[i]);
  EXPECT_EQ("00010203-0405-0607-0809-0a0b0c0d0e0f", u.ToString());
  // Upper case is accepted and printed lower case.
  const Uuid up = U("6BA7B810-9DAD-11D1-80B4-00C04FD430C8");
  EXPECT_EQ("6ba7b810-9dad-11d1-80b4-00c04fd430c8", up.ToString());
  EXPECT_EQ(up, U("6ba7b810-9dad-11d1-80b4-00c04fd430c8"));
  EXPECT_EQ("00000000-0000-0000-0000-000000000000", Uuid().ToString());
  // Bytes round trip.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(u.bytes().data()), 16), u.ToBytes());
  EXPECT_EQ(u, Uuid::FromBytes(u.ToBytes()));
  for (int i = 0; i < 100; ++i) {
    const Uuid r = Uuid::Random();
    EXPECT_EQ(r, U(r.ToString()));
    EXPECT_EQ(r, Uuid::FromBytes(r.ToBytes()));
  }
  EXPECT_LT(U("00000000-0000-0000-0000-000000000001"), U("00000000-0000-0000-0000-000000000002"));
  EXPECT_LT(U("0f000000-0000-0000-0000-000000000000"), U("10000000-0000-0000-0000-000000000000"));
}

TEST(UuidTest, RandomIsVersion4AndUnique) {
  std::set<Uuid> seen;
  for (int i = 0; i < 10000; ++i) {
    const Uuid r = Uuid::Random();
    ASSERT_EQ(0x40, r.bytes()[6] & 0xf0) << r.ToString();
    ASSERT_EQ(0x80, r.bytes()[8] & 0xc0) << r.ToString();
    ASSERT_TRUE(seen.insert(r).second) << "duplicate " << r.ToString();
  }
  EXPECT_EQ(UuidHash()(U("6ba7b810-9dad-11d1-80b4-00c04fd430c8")),
            UuidHash()(U("6BA7B810-9DAD-11D1-80B4-00C04FD430C8")));
}

TEST(UuidTest, InvalidTextIsInvalidArgumentNamingTheInput) {
  const std::vector<std::string> bad = {
      "",
      "not-a-uuid",
      "123e4567-e89b-12d3-a456-42661417400",    // 35 characters
      "123e4567-e89b-12d3-a456-4266141740000",  // 37
      "123e4567e89b12d3a456426614174000",       // no dashes
      "123e4567-e89b-12d3-a456_426614174000",   // wrong separator
      "123e45678e89b-12d3-a456-42661417400",    // dash moved
      "123e4567-e89b-12d3-a456-42661417400g",   // not hex
      "{23e4567-e89b-12d3-a456-42661417400}",
      " 23e4567-e89b-12d3-a456-426614174000",
      "123e4567-e89b-12d3-a456-4266141740\xc3\xa9",
      "'; DROP TABLE x; --aaaaaaaaaaaaaaaaa",
      "-23e4567-e89b-12d3-a456-426614174000",
      "+23e4567-e89b-12d3-a456-426614174000",
  };
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    Result<Uuid> r = Uuid::Parse(text);
    ASSERT_FALSE(r.ok()) << "parsed as " << r->ToString();
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
    EXPECT_THAT(r.status().message(), HasSubstr("invalid UUID '" + text + "'"));
  }
  const std::string with_nul(
      "123e4567-e89b-12d3-a456-4266141740\0"
      "0",
      36);
  EXPECT_FALSE(Uuid::Parse(with_nul).ok());
  // A very long input is shown shortened.
  Result<Uuid> long_input = Uuid::Parse(std::string(100000, 'a'));
  ASSERT_FALSE(long_input.ok());
  EXPECT_LT(long_input.status().message().size(), 300u);
}

// ---------------------------------------------------------------------------
// Time

// Independent conversion through the C library (UTC).
int64_t TimegmMicros(int y, int mo, int d, int h, int mi, int s, int us) {
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<int64_t>(timegm(&tm)) * 1000000 + us;
}

int64_t MustParse(const std::string& text) {
  Result<MicrosSinceEpoch> r = ParseRfc3339(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : std::numeric_limits<int64_t>::min();
}

TEST(TimeTest, FormatRfc3339PinnedValues) {
  EXPECT_EQ("1970-01-01T00:00:00.000000Z", FormatRfc3339(0));
  EXPECT_EQ("2026-11-22T01:58:34.123456Z", FormatRfc3339(1795312714123456));
  EXPECT_EQ("2000-02-29T23:59:59.000001Z", FormatRfc3339(951868799000001));
  EXPECT_EQ("1969-12-31T23:59:59.999999Z", FormatRfc3339(-1));
  EXPECT_EQ("1969-07-20T20:17:40.000000Z", FormatRfc3339(-14182940000000));
  EXPECT_EQ("2026-11-22 01:58:34.123456", FormatSqlDatetime(1795312714123456));
}

TEST(TimeTest, FormatAndParseAgreeWithTimegm) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 5000; ++i) {
    // 1900..2200
    const int64_t t = static_cast<int64_t>(rng() % (9467280000000000ull)) - 2208988800000000LL;
    const std::string s = FormatRfc3339(t);
    int y, mo, d, h, mi, se, us;
    ASSERT_EQ(
        7, std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &y, &mo, &d, &h, &mi, &se, &us))
        << s;
    ASSERT_EQ(t, TimegmMicros(y, mo, d, h, mi, se, us)) << s;
    ASSERT_EQ(t, MustParse(s));
    Result<MicrosSinceEpoch> sql = ParseSqlDatetime(FormatSqlDatetime(t));
    ASSERT_TRUE(sql.ok());
    ASSERT_EQ(t, *sql);
  }
}

TEST(TimeTest, ParseRfc3339Variants) {
  const int64_t base = TimegmMicros(2026, 11, 22, 1, 58, 34, 0);
  EXPECT_EQ(base, MustParse("2026-11-22T01:58:34Z"));
  EXPECT_EQ(base, MustParse("2026-11-22t01:58:34z"));
  EXPECT_EQ(base + 123456, MustParse("2026-11-22T01:58:34.123456Z"));
  EXPECT_EQ(base + 100000, MustParse("2026-11-22T01:58:34.1Z"));
  EXPECT_EQ(base + 123456, MustParse("2026-11-22T01:58:34.123456789Z"));  // truncated to micros
  EXPECT_EQ(base, MustParse("2026-11-22T03:58:34+02:00"));
  EXPECT_EQ(base, MustParse("2026-11-21T20:28:34-05:30"));
  EXPECT_EQ(base, MustParse("2026-11-22T01:58:34+00:00"));
  EXPECT_EQ(TimegmMicros(2026, 1, 1, 0, 0, 0, 0), MustParse("2026-01-01"));
  EXPECT_EQ(TimegmMicros(2024, 12, 31, 22, 30, 0, 0), MustParse("2025-01-01T00:00:00+01:30"));
}

TEST(TimeTest, ParseRfc3339RejectsMalformedInput) {
  for (const std::string& text : std::vector<std::string>{
           "", "now", "2026-11-22T01:58:34", "2026-11-22 01:58:34Z", "2026-13-01T00:00:00Z",
           "2026-00-10T00:00:00Z", "2026-01-32T00:00:00Z", "2026-01-01T24:00:00Z",
           "2026-01-01T00:60:00Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234567890Z",
           "2026-01-01T00:00:00+0100", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00 Z",
           "2026-01-01Z", "2026-1-01", "26-01-01", "2026-01-01T00:00:00ZZ", "1700000000"}) {
    SCOPED_TRACE(text);
    Result<MicrosSinceEpoch> r = ParseRfc3339(text);
    EXPECT_FALSE(r.ok()) << "parsed as " << FormatRfc3339(*r);
    if (!r.ok()) {
      EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
      EXPECT_THAT(r.status().message(), HasSubstr("invalid timestamp '" + text + "'"));
    }
  }
}

// Dates that do not exist must be rejected rather than rolled over into the
// next month (base/time.cc ParseDateTime only checks day <= 31; see report).
TEST(TimeTest, ParseRfc3339RejectsNonexistentDates) {
  for (const char* text : {"2026-02-29T00:00:00Z", "2026-02-30", "2026-04-31T00:00:00Z"})
    EXPECT_FALSE(ParseRfc3339(text).ok()) << text;
  EXPECT_TRUE(ParseRfc3339("2024-02-29T00:00:00Z").ok());
}

TEST(TimeTest, NowIsCurrent) {
  const int64_t now = NowMicros();
  const int64_t c = static_cast<int64_t>(time(nullptr)) * 1000000;
  EXPECT_LT(std::llabs(now - c), 2000000);
}

// ---------------------------------------------------------------------------
// Durations

TEST(DurationTest, ParsesEveryUnit) {
  const std::map<std::string, int64_t> good = {
      {"0s", 0},           {"500ms", 500},        {"1ms", 1},
      {"45s", 45000},      {"15m", 900000},       {"12h", 43200000},
      {"30d", 2592000000}, {"365d", 31536000000}, {"007s", 7000},
  };
  for (const auto& [text, ms] : good) {
    Result<int64_t> r = ParseDurationMillis(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(ms, *r) << text;
  }
}

TEST(DurationTest, RejectsMalformedInput) {
  for (const std::string& text : std::vector<std::string>{
           "", "30", "d", "ms", "-5s", "+5s", "1.5h", "30 d", " 30d", "30d ", "30D", "30S", "5w",
           "5y", "1h30m", "30dd", "0x10s", "99999999999999999999d"}) {
    SCOPED_TRACE(text);
    Result<int64_t> r = ParseDurationMillis(text);
    EXPECT_FALSE(r.ok()) << "parsed as " << *r;
    if (!r.ok()) {
      EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
      EXPECT_THAT(r.status().message(), HasSubstr("expected a duration like 30d"));
      EXPECT_THAT(r.status().message(), HasSubstr("'" + text + "'"));
    }
  }
}

// Values whose milliseconds overflow int64 must be rejected ("overflow" is in
// the contract of ParseDurationMillis); today 1e12 days wraps around silently.
TEST(DurationTest, RejectsOverflow) {
  for (const char* text : {"1000000000000d", "200000000000d", "10000000000000h"}) {
    Result<int64_t> r = ParseDurationMillis(text);
    EXPECT_FALSE(r.ok()) << text << " parsed as " << *r;
  }
}

TEST(HistogramTest, QuantileIsTheUpperBoundOfItsBucket) {
  Histogram h({0.01, 0.1, 1});
  EXPECT_EQ(h.Quantile(0.5), 0) << "empty";
  EXPECT_EQ(h.max(), 0);
  for (int i = 0; i < 90; ++i) h.Observe(0.005);  // bucket <= 0.01
  for (int i = 0; i < 10; ++i) h.Observe(0.5);    // bucket <= 1
  EXPECT_EQ(h.Quantile(0.5), 0.01);
  EXPECT_EQ(h.Quantile(0.9), 0.01);
  EXPECT_EQ(h.Quantile(0.95), 1);
  EXPECT_EQ(h.Quantile(1), 1);
  EXPECT_EQ(h.max(), 0.5);
}

// Above the top bound a quantile is the largest value observed, not the top
// bound (which understated it: an index lag of minutes read as 30 s).
TEST(HistogramTest, QuantileAboveTheTopBoundIsTheLargestObservation) {
  Histogram h({0.01, 0.1, 1});
  for (int i = 0; i < 50; ++i) h.Observe(0.05);
  for (int i = 0; i < 50; ++i) h.Observe(2 + i);  // 2 .. 51 s, all in the +Inf bucket
  EXPECT_EQ(h.Quantile(0.5), 0.1);
  EXPECT_EQ(h.Quantile(0.51), 51);
  EXPECT_EQ(h.Quantile(0.99), 51);
  EXPECT_EQ(h.max(), 51);
  double sum = 0;
  EXPECT_EQ(h.CumulativeCounts(&sum), (std::vector<uint64_t>{0, 50, 50, 100}));
  // The same answer from counts taken apart (a window of a histogram).
  EXPECT_EQ(BucketQuantile(h.bounds(), {0, 50, 50, 100}, 0.99, h.max()), 51);
  EXPECT_EQ(BucketQuantile(h.bounds(), {0, 0, 0, 0}, 0.99, 7), 0) << "nothing counted";
}

// ---------------------------------------------------------------------------
// NameThisThread

std::string NameOfThisThread() {
  char name[64] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadAndCutsToWhatLinuxKeeps) {
  std::string short_name, long_name;
  std::thread t([&] {
    NameThisThread("index-pool");
    short_name = NameOfThisThread();
    NameThisThread("a-component-with-a-long-name-pool");
    long_name = NameOfThisThread();
  });
  t.join();
  EXPECT_EQ(short_name, "index-pool");
  EXPECT_EQ(long_name, "a-component-wit");  // the first 15 bytes
}

TEST(ThreadNameTest, NamedThreadNamesItselfThenRuns) {
  std::string seen;
  std::thread t = NamedThread("relay-host0", [&] { seen = NameOfThisThread(); });
  t.join();
  EXPECT_EQ(seen, "relay-host0");
}

}  // namespace
}  // namespace cellar

// base/listening_sockets.h: the listener gets TCP_NODELAY and a connection it
// accepts afterwards inherits it (what the local broker relies on).
TEST(ListeningSocketsTest, NoDelayIsSetOnTheListenerAndInheritedByAcceptedConnections) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  auto nodelay = [](int fd) {
    int v = 0;
    socklen_t l = sizeof v;
    EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &l), 0);
    return v != 0;
  };
  EXPECT_FALSE(nodelay(listener));
  EXPECT_EQ(cellar::SetNoDelayOnListeningSockets("127.0.0.1:" + std::to_string(port)), 1);
  EXPECT_TRUE(nodelay(listener));
  EXPECT_EQ(cellar::SetNoDelayOnListeningSockets(std::vector<int>{port + 1}), 0);

  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(client, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_TRUE(nodelay(accepted));
  close(accepted);
  close(client);
  close(listener);
}
