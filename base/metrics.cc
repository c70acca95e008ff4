#include "base/metrics.h"

#include <algorithm>

#include "base/number_text.h"

namespace cellar {

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double s) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), s) - bounds_.begin();
  MutexLock lock(&mu_);
  counts_[i]++;
  sum_ += s;
  max_ = empty_ ? s : std::max(max_, s);
  empty_ = false;
}

uint64_t Histogram::count() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (auto c : counts_) n += c;
  return n;
}

double Histogram::max() const {
  MutexLock lock(&mu_);
  return max_;
}

double Histogram::Quantile(double q) const {
  double sum = 0;
  const std::vector<uint64_t> cumulative = CumulativeCounts(&sum);
  return BucketQuantile(bounds_, cumulative, q, max());
}

double BucketQuantile(const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative,
                      double q, double overflow) {
  const uint64_t total = cumulative.empty() ? 0 : cumulative.back();
  if (total == 0) return 0;
  const double want = q * static_cast<double>(total);
  for (size_t i = 0; i < bounds.size() && i < cumulative.size(); ++i)
    if (static_cast<double>(cumulative[i]) >= want) return bounds[i];
  return overflow;
}

std::vector<uint64_t> Histogram::CumulativeCounts(double* sum) const {
  MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  uint64_t run = 0;
  for (auto c : counts_) out.push_back(run += c);
  *sum = sum_;
  return out;
}

std::string RenderLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) s += ",";
    s += labels[i].first + "=\"";
    for (char c : labels[i].second) {
      if (c == '\\' || c == '"') s += '\\';
      if (c == '\n') {
        s += "\\n";
        continue;
      }
      s += c;
    }
    s += "\"";
  }
  return s + "}";
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name,
                                                    const std::string& type,
                                                    const std::string& help) {
  Family& f = families_[name];
  if (f.type.empty()) {
    f.type = type;
    f.help = help;
  }
  return f;
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, "counter", help).counters[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, "gauge", help).gauges[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const MetricLabels& labels, std::vector<double> bounds) {
  MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, "histogram", help).histograms[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return *slot;
}

namespace {
std::string Num(double v) { return DecimalText(v); }
// Inserts `extra` (e.g. le="0.5") into rendered labels.
std::string WithLabel(const std::string& labels, const std::string& extra) {
  if (labels.empty()) return "{" + extra + "}";
  return labels.substr(0, labels.size() - 1) + "," + extra + "}";
}
}  // namespace

std::string MetricsRegistry::Render() const {
  MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    for (const auto& [labels, c] : f.counters)
      out += name + labels + " " + std::to_string(c->value()) + "\n";
    for (const auto& [labels, g] : f.gauges) out += name + labels + " " + Num(g->value()) + "\n";
    for (const auto& [labels, h] : f.histograms) {
      double sum = 0;
      auto cum = h->CumulativeCounts(&sum);
      for (size_t i = 0; i < h->bounds().size(); ++i)
        out += name + "_bucket" + WithLabel(labels, "le=\"" + Num(h->bounds()[i]) + "\"") + " " +
               std::to_string(cum[i]) + "\n";
      out += name + "_bucket" + WithLabel(labels, "le=\"+Inf\"") + " " +
             std::to_string(cum.back()) + "\n";
      out += name + "_sum" + labels + " " + Num(sum) + "\n";
      out += name + "_count" + labels + " " + std::to_string(cum.back()) + "\n";
    }
  }
  return out;
}

}  // namespace cellar
