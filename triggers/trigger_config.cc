#include "triggers/trigger_config.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "base/number_text.h"
#include "config/yaml_reader.h"

namespace cellar {
namespace {

const nlohmann::json* FindField(const nlohmann::json& body, const std::string& path) {
  const nlohmann::json* cur = &body;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

template <typename T>
int Order(T x, T y) {
  return x < y ? -1 : (x > y ? 1 : 0);
}

// Two JSON numbers by value. Integers (int64 or uint64, as a body's JSON holds
// them) compare exactly: through double, 2^53 + 1 would equal 2^53.
int CompareNumbers(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    const bool a_unsigned = a.is_number_unsigned(), b_unsigned = b.is_number_unsigned();
    if (!a_unsigned && !b_unsigned) return Order(a.get<int64_t>(), b.get<int64_t>());
    if (a_unsigned && b_unsigned) return Order(a.get<uint64_t>(), b.get<uint64_t>());
    // One is unsigned: a negative signed value is below it, else both fit uint64.
    const int64_t s = a_unsigned ? b.get<int64_t>() : a.get<int64_t>();
    const uint64_t u = a_unsigned ? a.get<uint64_t>() : b.get<uint64_t>();
    const int signed_vs_unsigned = s < 0 ? -1 : Order(static_cast<uint64_t>(s), u);
    return a_unsigned ? -signed_vs_unsigned : signed_vs_unsigned;
  }
  return Order(a.get<double>(), b.get<double>());
}

// -1, 0, 1, or 2 when not comparable (different kinds).
int Compare(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b);
  if (a.is_string() && b.is_string()) {
    int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_boolean() && b.is_boolean()) return a == b ? 0 : 2;
  if (a.is_null() && b.is_null()) return 0;
  return 2;
}

bool Holds(const FieldCondition& c, const nlohmann::json& body) {
  const nlohmann::json* v = FindField(body, c.field);
  using Op = FieldCondition::Op;
  if (c.op == Op::kExists) return v != nullptr;
  if (!v) return c.op == Op::kNe;
  if (c.op == Op::kIn) {
    for (const auto& option : c.value)
      if (Compare(*v, option) == 0) return true;
    return false;
  }
  int cmp = Compare(*v, c.value);
  switch (c.op) {
    case Op::kEq:
      return cmp == 0;
    case Op::kNe:
      return cmp != 0;
    case Op::kLt:
      return cmp == -1;
    case Op::kLe:
      return cmp == -1 || cmp == 0;
    case Op::kGt:
      return cmp == 1;
    case Op::kGe:
      return cmp == 1 || cmp == 0;
    default:
      return false;
  }
}

// A plain (unquoted) scalar that YAML 1.2 reads as a number JSON cannot hold:
// hex or octal (our loader reads decimal only) or .inf/.nan.
std::string NotJsonNumber(const std::string& s) {
  std::string t = s.substr(!s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == ".inf" || t == ".nan") return "is not a finite number";
  const bool hex = t.size() > 2 && t.compare(0, 2, "0x") == 0 &&
                   t.find_first_not_of("0123456789abcdef", 2) == std::string::npos;
  const bool octal = t.size() > 2 && t.compare(0, 2, "0o") == 0 &&
                     t.find_first_not_of("01234567", 2) == std::string::npos;
  if (hex || octal) return "is not a decimal number";
  return "";  // a word such as 0xyz or 0oops
}

// A filter value as a body's JSON would hold it: a quoted scalar is a string;
// a plain one is true/false/null, else a decimal number (int64, then uint64,
// then double, as nlohmann parses a body; '+' and leading zeros as YAML 1.2
// reads them), else a string. Numbers JSON cannot hold are errors.
nlohmann::json ScalarToJson(YamlReader& r, const YAML::Node& n, const std::string& path) {
  if (n.IsSequence()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : n) arr.push_back(ScalarToJson(r, e, path));
    return arr;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted in YAML: always a string
  if (s == "true") return true;
  if (s == "false") return false;
  if (s == "null" || s == "~") return nullptr;
  const std::string_view digits = YamlReader::WithoutPlusSign(s);
  if (auto i = ParseDecimalInteger<int64_t>(digits)) return *i;
  if (auto u = ParseDecimalInteger<uint64_t>(digits)) return *u;
  bool out_of_range = false;
  if (auto d = ParseDecimalDouble(digits, &out_of_range)) return *d;
  std::string why = out_of_range ? "is out of the range of a number" : NotJsonNumber(s);
  if (!why.empty())
    r.Error(n, path, "'" + s + "' " + why + "; write it in decimal, or quote it for a string");
  return s;
}

bool ParseOp(const std::string& s, FieldCondition::Op* op) {
  using Op = FieldCondition::Op;
  static const std::pair<const char*, Op> kOps[] = {
      {"=", Op::kEq}, {"==", Op::kEq}, {"!=", Op::kNe}, {"<", Op::kLt},         {"<=", Op::kLe},
      {">", Op::kGt}, {">=", Op::kGe}, {"in", Op::kIn}, {"exists", Op::kExists}};
  for (const auto& [name, o] : kOps)
    if (s == name) {
      *op = o;
      return true;
    }
  return false;
}

void ReadRetry(YamlReader& r, const YAML::Node& n, const std::string& p, RetryPolicy* rp,
               On4xx* on4xx) {
  if (!r.CheckKeys(n, p, {"max_attempts", "initial_backoff_ms", "max_backoff_ms", "on_4xx"}))
    if (!n.IsMap()) return;
  int64_t v;
  if (r.ReadInt(n, "max_attempts", p, 1, 1000, &(v = rp->max_attempts))) rp->max_attempts = int(v);
  if (r.ReadInt(n, "initial_backoff_ms", p, 0, 3600000, &(v = rp->initial_backoff_ms)))
    rp->initial_backoff_ms = int(v);
  if (r.ReadInt(n, "max_backoff_ms", p, 0, 3600000, &(v = rp->max_backoff_ms)))
    rp->max_backoff_ms = int(v);
  std::string s;
  if (on4xx && r.ReadString(n, "on_4xx", p, &s)) {
    if (s == "dead_letter")
      *on4xx = On4xx::kDeadLetter;
    else if (s == "drop")
      *on4xx = On4xx::kDrop;
    else if (s == "retry")
      *on4xx = On4xx::kRetry;
    else
      r.Error(n["on_4xx"], p + ".on_4xx", "expected dead_letter, drop or retry");
  }
}

}  // namespace

bool MatchesFilter(const std::vector<FieldCondition>& filter, const nlohmann::json& body) {
  for (const auto& c : filter)
    if (!Holds(c, body)) return false;
  return true;
}

bool IsValidTriggerName(const std::string& name) { return IsValidDatastoreName(name); }

Result<std::vector<WebhookTriggerConfig>> ParseTriggerDefinitions(std::string_view yaml,
                                                                  const std::string& source,
                                                                  const ClusterConfig& cluster) {
  YamlReader r(source);
  YAML::Node root = r.Parse(yaml);
  if (!r.errors().empty()) return r.ToStatus();
  std::vector<WebhookTriggerConfig> out;
  r.CheckKeys(root, "", {"triggers"});
  if (!r.Require(root, "triggers", "")) return r.ToStatus();
  const YAML::Node list = root["triggers"];
  if (!r.ExpectSequence(list, "triggers")) return r.ToStatus();
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node t = list[i];
    const std::string p = "triggers[" + std::to_string(i) + "]";
    if (!r.CheckKeys(t, p,
                     {"name", "datastore", "column", "filter", "webhook", "retry", "dead_letter",
                      "include_tombstones"}) &&
        !t.IsMap())
      continue;
    WebhookTriggerConfig w;
    if (r.Require(t, "name", p) && r.ReadString(t, "name", p, &w.name)) {
      if (!IsValidTriggerName(w.name))
        r.Error(t["name"], p + ".name", "must match [a-z][a-z0-9_]{0,47}, got '" + w.name + "'");
      for (const auto& o : out)
        if (o.name == w.name) r.Error(t["name"], p + ".name", "duplicate trigger '" + w.name + "'");
    }
    const DatastoreConfig* ds = nullptr;
    if (r.Require(t, "datastore", p) && r.ReadString(t, "datastore", p, &w.datastore)) {
      ds = cluster.FindDatastore(w.datastore);
      if (!ds) r.Error(t["datastore"], p + ".datastore", "unknown datastore '" + w.datastore + "'");
    }
    if (r.Require(t, "column", p) && r.ReadString(t, "column", p, &w.column) && ds &&
        !ds->FindColumn(w.column))
      r.Error(t["column"], p + ".column",
              "datastore '" + w.datastore + "' has no column '" + w.column + "'");
    if (YAML::Node f = t["filter"]) {
      if (r.ExpectSequence(f, p + ".filter")) {
        for (size_t k = 0; k < f.size(); ++k) {
          const std::string fp = p + ".filter[" + std::to_string(k) + "]";
          const YAML::Node c = f[k];
          if (!r.CheckKeys(c, fp, {"field", "op", "value"}) && !c.IsMap()) continue;
          FieldCondition cond;
          std::string op = "=";
          r.Require(c, "field", fp) && r.ReadString(c, "field", fp, &cond.field);
          r.ReadString(c, "op", fp, &op);
          if (!ParseOp(op, &cond.op))
            r.Error(c["op"], fp + ".op",
                    "expected one of = != < <= > >= in exists, got '" + op + "'");
          if (cond.op != FieldCondition::Op::kExists) {
            if (r.Require(c, "value", fp)) cond.value = ScalarToJson(r, c["value"], fp + ".value");
            if (cond.op == FieldCondition::Op::kIn && !cond.value.is_array())
              r.Error(c["value"], fp + ".value", "op 'in' needs a list value");
          }
          w.filter.push_back(std::move(cond));
        }
      }
    }
    if (r.Require(t, "webhook", p)) {
      const YAML::Node h = t["webhook"];
      const std::string hp = p + ".webhook";
      if (r.CheckKeys(
              h, hp,
              {"url", "timeout_ms", "batch_size", "batch_window_ms", "ca_file", "secrets"}) ||
          h.IsMap()) {
        if (r.Require(h, "url", hp) && r.ReadString(h, "url", hp, &w.url) &&
            w.url.rfind("http://", 0) != 0 && w.url.rfind("https://", 0) != 0)
          r.Error(h["url"], hp + ".url", "expected an http:// or https:// URL");
        int64_t v = w.timeout_ms;
        if (r.ReadInt(h, "timeout_ms", hp, 1, 600000, &v)) w.timeout_ms = static_cast<int>(v);
        v = w.batch_size;
        if (r.ReadInt(h, "batch_size", hp, 1, 10000, &v)) w.batch_size = static_cast<int>(v);
        v = w.batch_window_ms;
        if (r.ReadInt(h, "batch_window_ms", hp, 0, 60000, &v))
          w.batch_window_ms = static_cast<int>(v);
        r.ReadString(h, "ca_file", hp, &w.ca_file);
        if (YAML::Node list = h["secrets"]; list && r.ExpectSequence(list, hp + ".secrets")) {
          if (list.size() > 2)
            r.Error(list, hp + ".secrets", "at most 2 secrets (the current and the next)");
          for (size_t k = 0; k < list.size(); ++k) {
            const std::string sp = hp + ".secrets[" + std::to_string(k) + "]";
            const YAML::Node one = list[k];
            if (!r.CheckKeys(one, sp, {"env", "file"}) && !one.IsMap()) continue;
            WebhookSecretSource source;
            r.ReadString(one, "env", sp, &source.env);
            r.ReadString(one, "file", sp, &source.file);
            if (source.env.empty() == source.file.empty())
              r.Error(one, sp, "give exactly one of env (a variable's name) and file (a path)");
            w.secrets.push_back(std::move(source));
          }
        }
      }
    }
    r.ReadBool(t, "include_tombstones", p, &w.include_tombstones);
    if (YAML::Node n = t["retry"]) ReadRetry(r, n, p + ".retry", &w.retry, &w.on_4xx);
    if (YAML::Node n = t["dead_letter"]) {
      const std::string dp = p + ".dead_letter";
      if (r.CheckKeys(n, dp, {"pause_after", "window", "later_events_of_row"}) || n.IsMap()) {
        int64_t v = w.dead_letter.pause_after;
        if (r.ReadInt(n, "pause_after", dp, 1, 1000000, &v)) w.dead_letter.pause_after = int(v);
        r.ReadDurationMillis(n, "window", dp, &w.dead_letter.window_ms);
        std::string s;
        if (r.ReadString(n, "later_events_of_row", dp, &s)) {
          if (s == "continue")
            w.dead_letter.later_events_of_row = LaterEventsPolicy::kContinue;
          else if (s == "set_aside")
            w.dead_letter.later_events_of_row = LaterEventsPolicy::kSetAside;
          else
            r.Error(n["later_events_of_row"], dp + ".later_events_of_row",
                    "expected continue or set_aside");
        }
      }
    }
    out.push_back(std::move(w));
  }
  if (!r.errors().empty()) return r.ToStatus();
  return out;
}

Result<std::vector<WebhookTriggerConfig>> LoadTriggerDefinitions(const std::string& path,
                                                                 const ClusterConfig& cluster) {
  std::ifstream in(path);
  if (!in) return InvalidArgument(path + ": cannot open trigger definitions");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTriggerDefinitions(ss.str(), path, cluster);
}

}  // namespace cellar
