// Metrics: counters, gauges and latency histograms rendered in the Prometheus
// text exposition format (version 0.0.4). Small on purpose: Debian ships no
// C++ Prometheus client.
//
// Usage:
//   MetricsRegistry reg;
//   Counter& handled = reg.GetCounter("cellar_trigger_handled_total", "Events handled",
//                                     {{"trigger", "billing"}, {"partition", "3"}});
//   handled.Increment();
//   std::string text = reg.Render();
// Threading: all methods are thread-safe; the returned references live as long
// as the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"

namespace cellar {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Increment(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Fixed-bucket histogram of seconds (Prometheus convention) that also answers
// approximate quantiles from its buckets.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds_seconds);
  void Observe(double seconds);
  // Quantile q (0..1) as BucketQuantile answers it: the upper bound of the
  // bucket holding it, or, when it falls above the top bound, the largest
  // value observed (finite, unlike Prometheus' histogram_quantile, which
  // answers +Inf there: the callers print it into JSON and logs). 0 when empty.
  double Quantile(double q) const;
  // The largest value observed; 0 when empty.
  double max() const;
  uint64_t count() const;
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound plus +Inf, and the sum.
  std::vector<uint64_t> CumulativeCounts(double* sum) const;

 private:
  std::vector<double> bounds_;
  mutable Mutex mu_;
  std::vector<uint64_t> counts_ GUARDED_BY(mu_);  // per bucket, last is +Inf
  double sum_ GUARDED_BY(mu_) = 0;
  double max_ GUARDED_BY(mu_) = 0;
  bool empty_ GUARDED_BY(mu_) = true;
};

// The upper bound of the bucket holding quantile q (0..1) of observations
// counted cumulatively in `cumulative` (one count per bound of `bounds`, then
// the +Inf bucket's, as Histogram::CumulativeCounts gives them); `overflow`
// when it falls in the +Inf bucket; 0 when nothing was counted.
// REQUIRES: cumulative.size() == bounds.size() + 1.
double BucketQuantile(const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative,
                      double q, double overflow);

// Default latency buckets: 0.5 ms .. 30 s.
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  Counter& GetCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help,
                  const MetricLabels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const MetricLabels& labels = {},
                          std::vector<double> bounds = LatencyBuckets());
  // The whole registry in Prometheus text format.
  std::string Render() const;

 private:
  struct Family {
    std::string type, help;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // by rendered labels
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyFor(const std::string& name, const std::string& type, const std::string& help)
      REQUIRES(mu_);
  mutable Mutex mu_;
  std::map<std::string, Family> families_ GUARDED_BY(mu_);
};

// `{a="x",b="y"}` with Prometheus escaping ("" when empty).
std::string RenderLabels(const MetricLabels& labels);

}  // namespace cellar
