// Unit tests of trigger definitions and their parsers: ParseTriggerDefinitions
// (every value, and "file:line: key: message" errors), LoadTriggerDefinitions,
// webhook URLs, ParseReplayFrom, and dead-letter encoding. Part of the
// triggers_unit_test binary.
#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "changelog/cell_event.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_cluster.h"
#include "tests/cell_event_testing.h"
#include "triggers/dead_letter.h"
#include "triggers/trigger_config.h"
#include "triggers/trigger_worker.h"
#include "triggers/webhook.h"

namespace cellar {
namespace {

using ::testing::HasSubstr;
using Op = FieldCondition::Op;
using nlohmann::json;

// ---------------------------------------------------------------------------
// Trigger definitions (YAML)

ClusterConfig Cluster() {
  const std::string yaml =
      "shards: 4\n"
      "mysql:\n  user: root\n  hosts:\n"
      "    - { name: h1, address: 127.0.0.1, port: 3306, shards: \"0-3\" }\n"
      "kafka:\n  brokers: \"127.0.0.1:9092\"\n"
      "datastores:\n"
      "  - name: trips\n    columns:\n      BASE: {}\n      STATUS: {}\n";
  auto c = ParseClusterConfig(yaml, "<unit>");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ClusterConfig{};
}

// 1-based line of the first line of `yaml` containing `needle`.
int LineOf(const std::string& yaml, const std::string& needle) {
  std::istringstream in(yaml);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return n;
  ADD_FAILURE() << "'" << needle << "' not in:\n" << yaml;
  return -1;
}

std::vector<std::string> Errors(const std::string& yaml) {
  auto r = ParseTriggerDefinitions(yaml, "hooks.yaml", Cluster());
  if (r.ok()) {
    ADD_FAILURE() << "accepted:\n" << yaml;
    return {};
  }
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  std::vector<std::string> lines;
  std::istringstream in(r.status().message());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(TriggerDefinitionsTest, FullDefinitionReadsEveryValue) {
  const std::string yaml = R"(triggers:
  - name: billing_hook
    datastore: trips
    column: BASE
    filter:
      - { field: status, op: "=", value: requested }
      - { field: fare.total, op: ">=", value: 20 }
      - { field: code, value: "20" }
      - { field: city, op: in, value: [ams, "ber", 3] }
      - { field: promo, op: exists }
      - { field: pooled, op: "!=", value: true }
      - { field: x, op: "<", value: 1.5 }
      - { field: y, op: "<=", value: -2 }
      - { field: z, op: ">", value: null }
      - { field: w, op: "==", value: "true" }
    webhook: { url: "http://127.0.0.1:8080/hook", timeout_ms: 2000, batch_size: 250, batch_window_ms: 40 }
    retry: { max_attempts: 7, initial_backoff_ms: 50, max_backoff_ms: 900, on_4xx: drop }
    dead_letter: { pause_after: 12, window: 90s, later_events_of_row: set_aside }
  - name: minimal
    datastore: trips
    column: STATUS
    webhook: { url: "https://example.com" }
  - name: signed
    datastore: trips
    column: STATUS
    webhook:
      url: "https://hooks.example.com/cellar"
      ca_file: /etc/cellar/ca.pem
      secrets: [ { env: HOOK_SECRET }, { file: /etc/cellar/next.secret } ]
)";
  auto r = ParseTriggerDefinitions(yaml, "hooks.yaml", Cluster());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  const WebhookTriggerConfig& s = (*r)[2];
  EXPECT_EQ(s.ca_file, "/etc/cellar/ca.pem");
  ASSERT_EQ(s.secrets.size(), 2u);
  EXPECT_EQ(s.secrets[0].env, "HOOK_SECRET");
  EXPECT_EQ(s.secrets[0].file, "");
  EXPECT_EQ(s.secrets[1].file, "/etc/cellar/next.secret");
  EXPECT_TRUE((*r)[1].secrets.empty()) << "unsigned unless secrets are named";
  const WebhookTriggerConfig& w = (*r)[0];
  EXPECT_EQ(w.name, "billing_hook");
  EXPECT_EQ(w.datastore, "trips");
  EXPECT_EQ(w.column, "BASE");
  EXPECT_EQ(w.url, "http://127.0.0.1:8080/hook");
  EXPECT_EQ(w.timeout_ms, 2000);
  EXPECT_EQ(w.batch_size, 250);
  EXPECT_EQ(w.batch_window_ms, 40);
  EXPECT_EQ(w.on_4xx, On4xx::kDrop);
  EXPECT_EQ(w.retry.max_attempts, 7);
  EXPECT_EQ(w.retry.initial_backoff_ms, 50);
  EXPECT_EQ(w.retry.max_backoff_ms, 900);
  EXPECT_EQ(w.dead_letter.pause_after, 12);
  EXPECT_EQ(w.dead_letter.window_ms, 90000);
  EXPECT_EQ(w.dead_letter.later_events_of_row, LaterEventsPolicy::kSetAside);
  ASSERT_EQ(w.filter.size(), 10u);
  auto cond = [&](size_t i, const std::string& field, Op op, const json& value) {
    EXPECT_EQ(w.filter[i].field, field) << i;
    EXPECT_EQ(w.filter[i].op, op) << i;
    EXPECT_EQ(w.filter[i].value, value) << i << ": " << w.filter[i].value.dump();
  };
  cond(0, "status", Op::kEq, "requested");
  cond(1, "fare.total", Op::kGe, 20);
  EXPECT_TRUE(w.filter[1].value.is_number());
  cond(2, "code", Op::kEq, "20");  // quoted: a string; op defaults to '='
  EXPECT_TRUE(w.filter[2].value.is_string());
  cond(3, "city", Op::kIn, json::array({"ams", "ber", 3}));
  EXPECT_EQ(w.filter[4].field, "promo");
  EXPECT_EQ(w.filter[4].op, Op::kExists);
  cond(5, "pooled", Op::kNe, true);
  cond(6, "x", Op::kLt, 1.5);
  cond(7, "y", Op::kLe, -2);
  cond(8, "z", Op::kGt, nullptr);
  cond(9, "w", Op::kEq, "true");
  // Defaults.
  const WebhookTriggerConfig& m = (*r)[1];
  EXPECT_EQ(m.name, "minimal");
  EXPECT_EQ(m.column, "STATUS");
  EXPECT_TRUE(m.filter.empty());
  EXPECT_EQ(m.timeout_ms, 5000);
  EXPECT_EQ(m.batch_size, 1);  // one event per POST unless asked
  EXPECT_EQ(m.batch_window_ms, 0);
  EXPECT_EQ(m.on_4xx, On4xx::kDeadLetter);
  EXPECT_EQ(m.retry.max_attempts, RetryPolicy{}.max_attempts);
  EXPECT_EQ(m.dead_letter.later_events_of_row, LaterEventsPolicy::kContinue);
  EXPECT_EQ(m.dead_letter.pause_after, DeadLetterPolicy{}.pause_after);

  // The options a worker gets carry the policies and the filter.
  TriggerOptions o = WebhookTriggerOptions(w);
  EXPECT_EQ(o.retry.max_attempts, 7);
  EXPECT_EQ(o.dead_letter.pause_after, 12);
  EXPECT_EQ(o.filter.size(), 10u);
  EXPECT_EQ(o.max_batch, 250);
  EXPECT_EQ(o.batch_linger_ms, 40);
  EXPECT_TRUE(MakeWebhookHandler(w).ok());
  EXPECT_TRUE(MakeWebhookBatchHandler(w).ok());
}

// A webhook trigger on trips.BASE whose filter is `items` (YAML list lines).
std::string NumbersTrigger(const std::string& items) {
  return "triggers:\n  - name: numbers\n    datastore: trips\n    column: BASE\n"
         "    webhook: { url: \"http://127.0.0.1:8080/hook\" }\n    filter:" +
         items;
}

// Plain filter values are numbers as a body's JSON would hold them (int64,
// then uint64, then double), YAML 1.2 decimal forms included; words stay
// strings. strtoll/strtod used to turn an out-of-range integer into INT64_MAX,
// 0x10 into 16.0 and inf or nan into non-finite doubles JSON cannot hold.
TEST(TriggerDefinitionsTest, FilterValuesAreNumbersAsABodyHoldsThem) {
  const std::string yaml = NumbersTrigger(R"(
      - { field: a, value: 9223372036854775807 }
      - { field: b, value: 18446744073709551615 }
      - { field: c, value: 99999999999999999999 }
      - { field: d, value: -9223372036854775809 }
      - { field: e, value: 010 }
      - { field: f, value: +5 }
      - { field: g, value: .5 }
      - { field: h, value: 1e3 }
      - { field: i, value: inf }
      - { field: j, value: nan }
      - { field: k, value: 12abc }
      - { field: l, value: -0 }
      - { field: m, value: 0xyz }
      - { field: n, value: 0oops }
)");
  auto r = ParseTriggerDefinitions(yaml, "hooks.yaml", Cluster());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& f = (*r)[0].filter;
  ASSERT_EQ(f.size(), 14u);
  EXPECT_TRUE(f[0].value.is_number_integer() && !f[0].value.is_number_unsigned());
  EXPECT_EQ(f[0].value.get<int64_t>(), INT64_MAX);
  EXPECT_TRUE(f[1].value.is_number_unsigned()) << f[1].value.dump();
  EXPECT_EQ(f[1].value.get<uint64_t>(), UINT64_MAX);
  // Beyond 64 bits, as nlohmann parses a body: a double.
  EXPECT_TRUE(f[2].value.is_number_float()) << f[2].value.dump();
  EXPECT_EQ(f[2].value, json::parse("99999999999999999999"));
  EXPECT_TRUE(f[3].value.is_number_float()) << f[3].value.dump();
  EXPECT_EQ(f[3].value, json::parse("-9223372036854775809"));
  EXPECT_EQ(f[4].value, 10) << "decimal, as YAML 1.2 reads it";
  EXPECT_EQ(f[5].value, 5);
  EXPECT_EQ(f[6].value, 0.5);
  EXPECT_TRUE(f[7].value.is_number_float());
  EXPECT_EQ(f[7].value, 1000.0);
  EXPECT_EQ(f[8].value, "inf") << "YAML 1.2 reads inf as a word";
  EXPECT_EQ(f[9].value, "nan");
  EXPECT_EQ(f[10].value, "12abc");
  EXPECT_EQ(f[11].value, 0);
  EXPECT_EQ(f[12].value, "0xyz") << "not hex digits: a word, as YAML reads it";
  EXPECT_EQ(f[13].value, "0oops");
}

TEST(TriggerDefinitionsTest, FilterNumbersJsonCannotHoldAreRefused) {
  const std::string yaml = NumbersTrigger(R"(
      - { field: a, value: 0x10 }
      - { field: b, value: .inf }
      - { field: c, value: -.Inf }
      - { field: d, value: .NaN }
      - { field: e, value: 1e400 }
      - { field: f, op: in, value: [1, 0o17] }
)");
  const std::vector<std::string> errors = Errors(yaml);
  auto has = [&](const std::string& needle, const std::string& expected) {
    const std::string line = "hooks.yaml:" + std::to_string(LineOf(yaml, needle)) + ": ";
    EXPECT_TRUE(std::find(errors.begin(), errors.end(), line + expected) != errors.end())
        << "missing error: " << line << expected << "\nall errors:\n"
        << ::testing::PrintToString(errors);
  };
  const std::string quote = "; write it in decimal, or quote it for a string";
  has("0x10", "triggers[0].filter[0].value: '0x10' is not a decimal number" + quote);
  has(".inf", "triggers[0].filter[1].value: '.inf' is not a finite number" + quote);
  has("-.Inf", "triggers[0].filter[2].value: '-.Inf' is not a finite number" + quote);
  has(".NaN", "triggers[0].filter[3].value: '.NaN' is not a finite number" + quote);
  has("1e400", "triggers[0].filter[4].value: '1e400' is out of the range of a number" + quote);
  has("0o17", "triggers[0].filter[5].value: '0o17' is not a decimal number" + quote);
  EXPECT_EQ(errors.size(), 6u) << ::testing::PrintToString(errors);
}

TEST(TriggerDefinitionsTest, EveryBadValueIsReportedWithFileLineAndKey) {
  const std::string yaml = R"(triggers:
  - name: Bad-Name
    datastore: trips
    column: NOPE
    colour: red
    filter:
      - { field: a, op: "~=", value: 1 }
      - { field: b, op: in, value: 3 }
      - { op: "=", value: 1 }
      - { field: c, op: "<" }
      - { field: d, value: 1, extra: 2 }
    webhook: { url: "ftp://example.com/x", timeout_ms: 0, method: PUT, batch_size: 0, batch_window_ms: -1 }
    retry: { max_attempts: 0, initial_backoff_ms: soon, on_4xx: explode, jitter: full }
    dead_letter: { pause_after: 0, window: forever, later_events_of_row: maybe }
  - name: second
    datastore: planes
    column: BASE
  - name: second
    datastore: trips
    column: BASE
    webhook: { timeout_ms: 100 }
  - name: third
    datastore: trips
    column: BASE
    webhook: { url: "http://x", secrets: [ { env: A, file: B }, { path: C }, { env: D } ] }
)";
  auto at = [&](const std::string& needle, int nth_line_offset = 0) {
    return "hooks.yaml:" + std::to_string(LineOf(yaml, needle) + nth_line_offset) + ": ";
  };
  const std::vector<std::string> errors = Errors(yaml);
  auto has = [&](const std::string& expected) {
    EXPECT_TRUE(std::find(errors.begin(), errors.end(), expected) != errors.end())
        << "missing error: " << expected << "\nall errors:\n"
        << ::testing::PrintToString(errors);
  };
  auto has_prefix = [&](const std::string& prefix) {
    EXPECT_TRUE(std::any_of(errors.begin(), errors.end(),
                            [&](const std::string& e) { return e.rfind(prefix, 0) == 0; }))
        << "no error starting with: " << prefix << "\nall errors:\n"
        << ::testing::PrintToString(errors);
  };
  has_prefix(at("Bad-Name") + "triggers[0].name: must match [a-z][a-z0-9_]{0,47}, got 'Bad-Name'");
  has(at("column: NOPE") + "triggers[0].column: datastore 'trips' has no column 'NOPE'");
  has_prefix(at("colour") + "triggers[0].colour: unknown key");
  has_prefix(at("~=") + "triggers[0].filter[0].op: expected one of = != < <= > >= in exists");
  has(at("op: in") + "triggers[0].filter[1].value: op 'in' needs a list value");
  has(at("{ op: \"=\"") + "triggers[0].filter[2].field: missing required key");
  has(at("field: c") + "triggers[0].filter[3].value: missing required key");
  has_prefix(at("extra: 2") + "triggers[0].filter[4].extra: unknown key");
  has(at("ftp://") + "triggers[0].webhook.url: expected an http:// or https:// URL");
  has_prefix(at("ftp://") + "triggers[0].webhook.timeout_ms: must be between 1 and");
  has_prefix(at("ftp://") + "triggers[0].webhook.method: unknown key");
  has_prefix(at("ftp://") + "triggers[0].webhook.batch_size: must be between 1 and 10000");
  has_prefix(at("ftp://") + "triggers[0].webhook.batch_window_ms: must be between 0 and 60000");
  has_prefix(at("max_attempts: 0") + "triggers[0].retry.max_attempts: must be between 1 and");
  has_prefix(at("max_attempts: 0") + "triggers[0].retry.initial_backoff_ms: expected an integer");
  has(at("max_attempts: 0") + "triggers[0].retry.on_4xx: expected dead_letter, drop or retry");
  has_prefix(at("max_attempts: 0") + "triggers[0].retry.jitter: unknown key");
  has_prefix(at("pause_after: 0") + "triggers[0].dead_letter.pause_after: must be between 1 and");
  has_prefix(at("pause_after: 0") + "triggers[0].dead_letter.window: expected a duration");
  has(at("pause_after: 0") +
      "triggers[0].dead_letter.later_events_of_row: expected continue or set_aside");
  has(at("datastore: planes") + "triggers[1].datastore: unknown datastore 'planes'");
  has_prefix(at("datastore: planes", -1) + "triggers[1].webhook: missing required key");
  has(at("name: second", 3) + "triggers[2].name: duplicate trigger 'second'");
  has_prefix(at("webhook: { timeout_ms: 100 }") + "triggers[2].webhook.url: missing required key");
  has(at("secrets: [") +
      "triggers[3].webhook.secrets: at most 2 secrets (the current and the next)");
  has(at("secrets: [") +
      "triggers[3].webhook.secrets[0]: give exactly one of env (a variable's "
      "name) and file (a path)");
  has_prefix(at("secrets: [") + "triggers[3].webhook.secrets[1].path: unknown key");
  // Every error names the file, a line and a key.
  for (const auto& e : errors)
    EXPECT_THAT(e, ::testing::MatchesRegex("hooks\\.yaml:[0-9]+: triggers[^ ]*: .+")) << e;
}

// Erases reach webhooks by default (issue #17); `include_tombstones: false`
// turns them off; anything but a boolean is an error with file, line and key.
TEST(TriggerDefinitionsTest, IncludeTombstonesDefaultsToTrueAndCanBeTurnedOff) {
  const std::string yaml = R"(triggers:
  - name: with_erases
    datastore: trips
    column: BASE
    webhook: { url: "http://127.0.0.1:8080/a" }
  - name: without_erases
    datastore: trips
    column: BASE
    include_tombstones: false
    webhook: { url: "http://127.0.0.1:8080/b" }
  - name: explicit_erases
    datastore: trips
    column: BASE
    include_tombstones: true
    webhook: { url: "http://127.0.0.1:8080/c" }
)";
  auto r = ParseTriggerDefinitions(yaml, "hooks.yaml", Cluster());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_TRUE((*r)[0].include_tombstones);
  EXPECT_FALSE((*r)[1].include_tombstones);
  EXPECT_TRUE((*r)[2].include_tombstones);
  EXPECT_TRUE(WebhookTriggerOptions((*r)[0]).include_tombstones);
  EXPECT_FALSE(WebhookTriggerOptions((*r)[1]).include_tombstones);
  EXPECT_TRUE(TriggerOptions{}.include_tombstones) << "C++ handlers get erases by default too";

  const std::string bad = R"(triggers:
  - name: a
    datastore: trips
    column: BASE
    include_tombstones: sometimes
    include_tombstone: false
    webhook: { url: "http://127.0.0.1:8080/a" }
)";
  const std::vector<std::string> errors = Errors(bad);
  EXPECT_THAT(errors, ::testing::Contains("hooks.yaml:5: triggers[0].include_tombstones: "
                                          "expected true or false"));
  EXPECT_THAT(errors, ::testing::Contains(::testing::StartsWith(
                          "hooks.yaml:6: triggers[0].include_tombstone: unknown key")));
}

TEST(TriggerDefinitionsTest, DocumentShapeErrors) {
  auto errs = Errors("triggers: [\n");
  ASSERT_FALSE(errs.empty());
  EXPECT_THAT(errs[0], ::testing::StartsWith("hooks.yaml:"));
  errs = Errors("hooks:\n  - name: a\n");
  EXPECT_THAT(errs, ::testing::Contains(HasSubstr("hooks.yaml:1: hooks: unknown key")));
  EXPECT_THAT(errs, ::testing::Contains(HasSubstr("triggers: missing required key")));
  errs = Errors("triggers: {name: a}\n");
  EXPECT_THAT(errs, ::testing::Contains("hooks.yaml:1: triggers: expected a list"));
  errs = Errors("triggers:\n  - just a string\n");
  EXPECT_THAT(errs, ::testing::Contains("hooks.yaml:2: triggers[0]: expected a mapping"));
  errs = Errors(
      "triggers:\n  - name: a\n    datastore: trips\n    column: BASE\n"
      "    webhook: { url: \"http://h/x\" }\n    filter: { field: a }\n");
  EXPECT_THAT(errs, ::testing::Contains("hooks.yaml:6: triggers[0].filter: expected a list"));
  // An empty list is valid: no triggers.
  auto none = ParseTriggerDefinitions("triggers: []\n", "hooks.yaml", Cluster());
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

TEST(TriggerDefinitionsTest, LoadFromFile) {
  const std::string path = testing::WriteTempFile(
      "triggers:\n  - name: from_file\n    datastore: trips\n    column: BASE\n"
      "    webhook: { url: \"http://127.0.0.1:1/x\" }\n    colour: red\n",
      ".yaml");
  auto r = LoadTriggerDefinitions(path, Cluster());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path + ":6: triggers[0].colour: unknown key"));
  auto missing = LoadTriggerDefinitions(path + ".nope", Cluster());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(path + ".nope"));
}

TEST(TriggerDefinitionsTest, WebhookHandlerRejectsUnusableUrls) {
  WebhookTriggerConfig c;
  c.name = "h";
  c.datastore = "trips";
  c.column = "BASE";
  for (const char* url : {"127.0.0.1:80/x", "ftp://h/x", "http://", "http:///path"}) {
    c.url = url;
    auto h = MakeWebhookHandler(c);
    EXPECT_FALSE(h.ok()) << url;
    if (!h.ok()) {
      EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << url;
    }
  }
  for (const char* url :
       {"http://127.0.0.1:8080/hook", "http://localhost", "https://h:1/a/b?c=d"}) {
    c.url = url;
    EXPECT_TRUE(MakeWebhookHandler(c).ok()) << url;
  }
}

// ---------------------------------------------------------------------------
// ParseReplayFrom

TEST(ParseReplayFromTest, BeginningTimesAndShardPairs) {
  for (const char* text : {"beginning", "0"}) {
    auto b = ParseReplayFrom(text);
    ASSERT_TRUE(b.ok()) << text;
    EXPECT_FALSE(b->time) << text;
    EXPECT_TRUE(b->after_added_id.empty()) << text;
  }
  auto t = ParseReplayFrom("2026-03-01T12:00:00.250000Z");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->time);
  EXPECT_EQ(*t->time, *ParseRfc3339("2026-03-01T12:00:00.25Z"));
  EXPECT_TRUE(t->after_added_id.empty());
  auto offset = ParseReplayFrom("2026-03-01T13:00:00+01:00");
  ASSERT_TRUE(offset.ok()) << offset.status().ToString();
  EXPECT_EQ(*offset->time, *ParseRfc3339("2026-03-01T12:00:00Z"));
  auto date = ParseReplayFrom("2026-03-01");
  ASSERT_TRUE(date.ok()) << date.status().ToString();
  EXPECT_EQ(*date->time, *ParseRfc3339("2026-03-01T00:00:00Z"));

  auto pairs = ParseReplayFrom("3:17,0:5,12:0");
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  EXPECT_FALSE(pairs->time);
  EXPECT_EQ(pairs->after_added_id, (std::map<uint32_t, uint64_t>{{0, 5}, {3, 17}, {12, 0}}));
  auto big = ParseReplayFrom("7:123456789012,4294967295:1");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->after_added_id.at(7), 123456789012u);
  EXPECT_EQ(big->after_added_id.at(4294967295u), 1u);
}

TEST(ParseReplayFromTest, BadInputIsInvalidArgument) {
  for (const char* bad :
       {"", "yesterday", "now", "3:", ":5", "3:x", "x:3", "3:5,", ",3:5", "3:5,,4:1", "3:5:7",
        "3;5", "3:5 4:6", "3:0x10", "2026-13-01T00:00:00Z", "2026-03-01T25:00:00Z", "4294967296:1",
        "99999999999999999999:1", "3:99999999999999999999"}) {
    auto r = ParseReplayFrom(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_THAT(r.status().message(), HasSubstr("--from")) << bad;
      EXPECT_THAT(r.status().message(), HasSubstr("'")) << "quotes the bad input: " << bad;
    }
  }
}

// ---------------------------------------------------------------------------
// Dead letters

TEST(DeadLetterTest, EncodeDecodeRoundTripAndTopicNames) {
  KafkaConfig k;
  k.topic_prefix = "px";
  EXPECT_EQ(DeadLetterTopic(k, "trips", "billing"), "px.trips.billing.dlq");
  EXPECT_EQ(RetryTopic(k, "trips", "billing"), "px.trips.billing.retry");
  Cell c;
  c.row_key = Uuid::Random();
  c.column = "BASE";
  c.ref_key = 4;
  c.body = {{"fare", {{"total", 9}}}};
  c.created_at = 1'700'000'000'123'456;
  c.shard = 3;
  c.added_id = 99;
  DeadLetter d;
  d.trigger = "billing";
  d.datastore = "trips";
  d.error = "Unavailable: \"quoted\"\nsecond line";
  d.attempts = 5;
  d.failed_at = 1'700'000'001'000'000;
  d.source_topic = "px.trips.cells";
  d.source_partition = 2;
  d.source_offset = 17;
  d.event_json = EncodeCellEvent("trips", c, INT64_MAX);
  auto back = DecodeDeadLetter(EncodeDeadLetter(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->trigger, d.trigger);
  EXPECT_EQ(back->datastore, d.datastore);
  EXPECT_EQ(back->error, d.error);
  EXPECT_EQ(back->attempts, 5);
  EXPECT_EQ(back->failed_at, d.failed_at);
  EXPECT_EQ(back->source_topic, d.source_topic);
  EXPECT_EQ(back->source_partition, 2);
  EXPECT_EQ(back->source_offset, 17);
  auto ev = DecodeCellEvent(back->event_json);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  EXPECT_EQ(ev->cell.row_key, c.row_key);
  EXPECT_EQ(ev->cell.ref_key, 4);
  EXPECT_EQ(ev->cell.added_id, 99u);
  EXPECT_EQ(ev->cell.body, c.body);
  for (const char* bad : {"", "{}", "[1]", "{\"event\": 3}", "not json"})
    EXPECT_FALSE(DecodeDeadLetter(bad).ok()) << bad;
}

// A batch POST's body: CloudEvents' batched content mode, each event in
// structured mode with the attributes a single-event POST sends as ce-*
// headers, and the change-log event as "data".
TEST(WebhookBatchEncodingTest, ArrayOfStructuredCloudEventsWithTheEventAsData) {
  KafkaConfig kafka;
  kafka.topic_prefix = "cellar";
  CellEvent written{.datastore = "trips", .cell = EventCell(41)};
  written.cell.body = {{"fare", 12.5}, {"note", "a \"quoted\" word"}};
  CellEvent erased{.datastore = "trips", .cell = EventCell(42)};
  erased.cell.ref_key = 4;
  erased.cell.tombstone = true;
  const std::vector<const CellEvent*> events = {&written, &erased};
  const std::string body = EncodeWebhookBatch(kafka, events);
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_array()) << body;
  ASSERT_EQ(j.size(), 2u);
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE(j[i].dump());
    const CellEvent& e = *events[i];
    // Exactly the attributes of the binary mode's headers, without "ce-".
    std::map<std::string, std::string> want;
    for (const EventHeader& h :
         CloudEventHeaders(CloudEventBinding::kHttp, kafka, e.datastore, e.cell)) {
      ASSERT_EQ(h.name.rfind("ce-", 0), 0u) << h.name;
      want[h.name.substr(3)] = h.value;
    }
    for (const auto& [attribute, value] : want) EXPECT_EQ(j[i].value(attribute, ""), value);
    EXPECT_EQ(j[i]["specversion"], "1.0");
    EXPECT_EQ(j[i]["datacontenttype"], "application/json");
    EXPECT_EQ(j[i].size(), want.size() + 2) << "attributes, datacontenttype and data only";
    auto data = DecodeCellEvent(j[i]["data"].dump());
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    EXPECT_EQ(data->cell.added_id, e.cell.added_id);
    EXPECT_EQ(data->cell.ref_key, e.cell.ref_key);
    EXPECT_EQ(data->cell.tombstone, e.cell.tombstone);
    EXPECT_EQ(data->cell.body, e.cell.body);
  }
  EXPECT_EQ(j[0]["type"], "cellar.cell.written");
  EXPECT_EQ(j[1]["type"], "cellar.cell.erased");
  EXPECT_EQ(EncodeWebhookBatch(kafka, {}), "[]");
}

}  // namespace
}  // namespace cellar
