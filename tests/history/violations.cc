#include "tests/history/violations.h"

namespace cellar::history {

void Violations::Add(const std::string& check, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  all_.emplace_back(check, detail);
}

void Violations::AddAll(const Violations& other) {
  std::scoped_lock lock(mu_, other.mu_);
  all_.insert(all_.end(), other.all_.begin(), other.all_.end());
}

size_t Violations::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

std::string Violations::First() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.empty() ? "" : all_.front().first + ": " + all_.front().second;
}

std::map<std::string, size_t> Violations::ByCheck() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, size_t> out;
  for (const auto& [check, detail] : all_) ++out[check];
  return out;
}

std::string Violations::Some(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (size_t i = 0; i < all_.size() && i < max; ++i)
    out += "  " + all_[i].first + ": " + all_[i].second + "\n";
  return out;
}

}  // namespace cellar::history
