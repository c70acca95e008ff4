// Names of Cellar's threads, as `top -H`, `perf` and gdb show them.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace cellar {

// Names the calling thread `name`, cut to the 15 bytes Linux keeps. Best
// effort: a name the system refuses leaves the old one. Any thread.
void NameThisThread(std::string_view name);

// A thread that names itself `name` (as NameThisThread), then runs `fn`.
template <typename Fn>
std::thread NamedThread(std::string name, Fn fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)]() mutable {
    NameThisThread(name);
    fn();
  });
}

}  // namespace cellar
