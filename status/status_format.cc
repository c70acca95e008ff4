// The two renderings of a ClusterStatus: JSON (stable keys: every key is
// always present, null when unknown) and the human table.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "status/cluster_status.h"

namespace cellar {
namespace {

nlohmann::json ErrorOrNull(const std::string& e) {
  return e.empty() ? nlohmann::json(nullptr) : nlohmann::json(e);
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// Columns padded to their widest cell, two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].size());
      }
    std::string out;
    for (const auto& r : rows_) {
      std::string line = " ";
      for (size_t i = 0; i < r.size(); ++i) {
        line += " " + r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 1, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Age(const std::optional<double>& s) {
  if (!s) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", *s);
  return buf;
}

}  // namespace

nlohmann::json ClusterStatusToJson(const ClusterStatus& st) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : st.hosts) {
    nlohmann::json replicas = nlohmann::json::array();
    for (const auto& r : h.replicas)
      replicas.push_back(
          {{"server", r.server},
           {"up", r.up},
           {"lag_seconds", r.lag_seconds >= 0 ? nlohmann::json(r.lag_seconds) : nlohmann::json()}});
    hosts.push_back({{"name", h.name},
                     {"address", h.address},
                     {"epoch", h.epoch},
                     {"replicas", replicas},
                     {"up", h.up},
                     {"version", h.up ? nlohmann::json(h.version) : nlohmann::json(nullptr)},
                     {"latency_ms", h.up ? nlohmann::json(h.latency_ms) : nlohmann::json(nullptr)},
                     {"error", ErrorOrNull(h.error)}});
  }
  nlohmann::json relay = nlohmann::json::array();
  uint64_t relay_total = 0;
  for (const auto& r : st.relay) {
    relay.push_back({{"host", r.host},
                     {"datastore", r.datastore},
                     {"checkpoint", r.checkpoint},
                     {"head", r.head},
                     {"lag", r.lag},
                     {"owned", r.owned},
                     {"oldest_age_s", OrNull(r.oldest_age_s)},
                     {"error", ErrorOrNull(r.error)}});
    relay_total += r.lag;
  }
  nlohmann::json triggers = nlohmann::json::array();
  for (const auto& t : st.triggers)
    triggers.push_back({{"name", t.name},
                        {"datastore", t.datastore},
                        {"lag", t.error.empty() ? nlohmann::json(t.lag) : nlohmann::json(nullptr)},
                        {"dead_letters", t.error.empty() ? nlohmann::json(t.dead_letters)
                                                         : nlohmann::json(nullptr)},
                        {"paused", OrNull(t.paused)},
                        {"paused_reason", OrNull(t.paused_reason)},
                        {"oldest_age_s", OrNull(t.oldest_age_s)},
                        {"error", ErrorOrNull(t.error)}});
  nlohmann::json indexes = nlohmann::json::array();
  for (const auto& i : st.indexes) {
    nlohmann::json versions = nlohmann::json::array();
    for (const auto& [v, state] : i.versions)
      versions.push_back({{"version", v}, {"state", state}});
    indexes.push_back({{"name", i.name},
                       {"datastore", i.datastore},
                       {"serving_version", i.serving_version},
                       {"versions", versions},
                       {"lag", OrNull(i.lag)},
                       {"oldest_age_s", OrNull(i.oldest_age_s)},
                       {"error", ErrorOrNull(i.error)}});
  }
  return {{"at", FormatRfc3339(st.at)},
          {"reachable", st.AnythingReachable()},
          {"hosts", hosts},
          {"kafka",
           {{"configured", st.kafka.configured},
            {"reachable", st.kafka.reachable},
            {"error", ErrorOrNull(st.kafka.error)}}},
          {"relay", relay},
          {"relay_total_lag", relay_total},
          {"triggers", triggers},
          {"indexes", indexes}};
}

namespace {
std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}
}  // namespace

std::string FormatClusterStatus(const ClusterStatus& st) {
  std::ostringstream out;
  out << "cellar status at " << FormatRfc3339(st.at) << "\n\nMySQL hosts\n";
  Table hosts({"HOST", "ADDRESS", "STATE", "LATENCY", "DETAIL"});
  for (const auto& h : st.hosts) {
    char ms[32] = "-";
    if (h.up) std::snprintf(ms, sizeof ms, "%.1fms", h.latency_ms);
    hosts.Add({h.name, h.address, h.up ? "up" : "DOWN", ms, h.up ? h.version : h.error});
  }
  out << hosts.Render();
  Table replicas({"HOST", "REPLICA", "STATE", "LAG"});
  bool any_replica = false;
  for (const auto& h : st.hosts)
    for (const auto& r : h.replicas) {
      any_replica = true;
      replicas.Add({h.name, r.server, r.up ? "up" : "DOWN",
                    r.lag_seconds >= 0 ? FormatSeconds(r.lag_seconds) : "unknown"});
    }
  if (any_replica) out << "\nReplicas\n" << replicas.Render();

  out << "\nKafka: "
      << (!st.kafka.configured ? "not configured"
          : st.kafka.reachable ? "reachable"
                               : "UNREACHABLE (" + st.kafka.error + ")")
      << "\n\nRelay (per host stream)\n";
  Table relay({"HOST", "DATASTORE", "CHECKPOINT", "HEAD", "LAG", "OLDEST", "OWNED", "ERROR"});
  for (const auto& r : st.relay)
    relay.Add({r.host, r.datastore, r.error.empty() ? std::to_string(r.checkpoint) : "-",
               r.error.empty() ? std::to_string(r.head) : "-",
               r.error.empty() ? std::to_string(r.lag) : "-", Age(r.oldest_age_s),
               r.owned ? "yes" : "NO", r.error});
  out << relay.Render();

  out << "\nTriggers\n";
  if (st.triggers.empty()) {
    out << "  (none named: --trigger NAME or --triggers FILE)\n";
  } else {
    Table trig({"TRIGGER", "DATASTORE", "LAG", "OLDEST", "DLQ", "PAUSED", "ERROR"});
    for (const auto& t : st.triggers) {
      std::string paused = "-";
      if (t.paused) paused = *t.paused ? "PAUSED" : "no";
      if (t.paused_reason && !t.paused_reason->empty()) paused += " (" + *t.paused_reason + ")";
      trig.Add({t.name, t.datastore, t.error.empty() ? std::to_string(t.lag) : "-",
                Age(t.oldest_age_s), t.error.empty() ? std::to_string(t.dead_letters) : "-", paused,
                t.error});
    }
    out << trig.Render();
  }

  out << "\nIndexes\n";
  if (st.indexes.empty()) {
    out << "  (none applied)\n";
  } else {
    Table idx({"INDEX", "DATASTORE", "SERVING", "VERSIONS", "LAG", "OLDEST", "ERROR"});
    for (const auto& i : st.indexes) {
      std::string versions;
      for (const auto& [v, state] : i.versions)
        versions += (versions.empty() ? "v" : " v") + std::to_string(v) + ":" + state;
      idx.Add({i.name, i.datastore,
               i.serving_version ? "v" + std::to_string(i.serving_version) : "-",
               versions.empty() ? "-" : versions, i.lag ? std::to_string(*i.lag) : "-",
               Age(i.oldest_age_s), i.error});
    }
    out << idx.Render();
  }
  return out.str();
}

}  // namespace cellar
