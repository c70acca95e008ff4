// Names of Cellar's threads, as `top -H`, `perf` and gdb show them.
#pragma once

#include <string_view>

namespace cellar {

// Names the calling thread `name`, cut to the 15 bytes Linux keeps. Best
// effort: a name the system refuses leaves the old one. Any thread.
void NameThisThread(std::string_view name);

}  // namespace cellar
