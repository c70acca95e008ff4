#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/time.h"

namespace cellar {
namespace {

LogLevel InitialLevel() {
  const char* env = std::getenv("CELLAR_LOG_LEVEL");
  if (!env) return LogLevel::kInfo;
  if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(env, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(env, "error")) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<LogLevel> g_level{InitialLevel()};

void AppendValue(std::string& out, std::string_view v) {
  bool quote = v.empty() || v.find_first_of(" \"=\t\n") != std::string_view::npos;
  if (!quote) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
      continue;
    }
    out.push_back(c);
  }
  out.push_back('"');
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = level; }

bool LogEnabled(LogLevel level) { return level >= g_level.load(); }

void Log(LogLevel level, std::string_view component, std::string_view msg,
         std::initializer_list<LogField> fields) {
  if (level < g_level.load()) return;
  std::string line =
      "ts=" + FormatRfc3339(NowMicros()) + " level=" + LevelName(level) + " component=";
  AppendValue(line, component);
  line.append(" msg=");
  AppendValue(line, msg);
  for (const auto& [k, v] : fields) {
    line.push_back(' ');
    line.append(k);
    line.push_back('=');
    AppendValue(line, v);
  }
  line.push_back('\n');
  ssize_t n = ::write(2, line.data(), line.size());
  (void)n;
}

}  // namespace cellar
