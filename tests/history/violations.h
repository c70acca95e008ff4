// Violations: the failed checks of a history run, in the order they were
// found, each under the name of the check it violates. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cellar::history {

class Violations {
 public:
  void Add(const std::string& check, const std::string& detail);
  // Adds every violation of `other`, in its order. REQUIRES: &other != this.
  void AddAll(const Violations& other);
  size_t size() const;
  // "<check>: <detail>" of the first violation ("" when none).
  std::string First() const;
  std::map<std::string, size_t> ByCheck() const;
  // Up to `max` violations, one "<check>: <detail>" per line.
  std::string Some(size_t max) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> all_;
};

}  // namespace cellar::history
