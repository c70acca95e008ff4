#include "base/time.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace cellar {
namespace {

// Days from civil date (Howard Hinnant's algorithm): exact for any year.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// Parses "YYYY-MM-DD?HH:MM:SS[.ffffff]" where ? is `sep`; returns position after it.
bool ParseDateTime(std::string_view s, char sep, MicrosSinceEpoch* out, size_t* end,
                   bool allow_date_only) {
  int y, mo, d, h = 0, mi = 0, se = 0;
  if (!Digits(s, 0, 4, &y) || s.size() < 10 || s[4] != '-' || !Digits(s, 5, 2, &mo) ||
      s[7] != '-' || !Digits(s, 8, 2, &d))
    return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] + (mo == 2 && leap ? 1 : 0)) return false;
  size_t pos = 10;
  if (s.size() == 10 && allow_date_only) {
    *out = DaysFromCivil(y, mo, d) * 86400LL * 1000000LL;
    *end = 10;
    return true;
  }
  if (s.size() < 19) return false;
  if (s[10] != sep && !(sep == 'T' && s[10] == 't')) return false;
  if (!Digits(s, 11, 2, &h) || s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' ||
      !Digits(s, 17, 2, &se))
    return false;
  if (h > 23 || mi > 59 || se > 60) return false;
  pos = 19;
  int64_t micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int n = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (n < 6) micros = micros * 10 + (s[pos] - '0');
      ++n;
      ++pos;
    }
    if (n == 0 || n > 9) return false;
    for (int i = n; i < 6; ++i) micros *= 10;
  }
  *out = ((DaysFromCivil(y, mo, d) * 86400LL + h * 3600LL + mi * 60LL + se) * 1000000LL) + micros;
  *end = pos;
  return true;
}

void Civil(MicrosSinceEpoch t, int* y, int* mo, int* d, int* h, int* mi, int* s, int* us) {
  int64_t secs = t >= 0 ? t / 1000000 : (t - 999999) / 1000000;
  *us = static_cast<int>(t - secs * 1000000);
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t rem = secs - days * 86400;
  *h = static_cast<int>(rem / 3600);
  *mi = static_cast<int>(rem % 3600 / 60);
  *s = static_cast<int>(rem % 60);
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *mo = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = static_cast<int>(static_cast<int64_t>(yoe) + era * 400 + (*mo <= 2));
}

std::string Format(MicrosSinceEpoch t, char sep, bool zulu) {
  int y, mo, d, h, mi, s, us;
  Civil(t, &y, &mo, &d, &h, &mi, &s, &us);
  char buf[64];  // the widest ints GCC assumes need 63 (-Wformat-truncation)
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d%c%02d:%02d:%02d.%06d%s", y, mo, d, sep, h, mi, s,
                us, zulu ? "Z" : "");
  return buf;
}

}  // namespace

MicrosSinceEpoch NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatRfc3339(MicrosSinceEpoch t) { return Format(t, 'T', true); }
std::string FormatSqlDatetime(MicrosSinceEpoch t) { return Format(t, ' ', false); }

Result<MicrosSinceEpoch> ParseRfc3339(std::string_view text) {
  MicrosSinceEpoch t;
  size_t end;
  auto bad = [&] {
    return InvalidArgument("invalid timestamp '" + std::string(text.substr(0, 64)) +
                           "': expected RFC 3339 like 2026-01-01T00:00:00Z");
  };
  if (!ParseDateTime(text, 'T', &t, &end, /*allow_date_only=*/true)) return bad();
  if (end == 10 && text.size() == 10) return t;
  if (end == text.size()) return bad();  // an offset is required
  std::string_view zone = text.substr(end);
  if (zone == "Z" || zone == "z") return t;
  int oh, om;
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || !Digits(zone, 1, 2, &oh) ||
      zone[3] != ':' || !Digits(zone, 4, 2, &om) || oh > 23 || om > 59)
    return bad();
  int64_t offset = (oh * 3600LL + om * 60LL) * 1000000LL;
  return zone[0] == '+' ? t - offset : t + offset;
}

Result<MicrosSinceEpoch> ParseSqlDatetime(std::string_view text) {
  MicrosSinceEpoch t;
  size_t end;
  if (!ParseDateTime(text, ' ', &t, &end, false) || end != text.size())
    return InvalidArgument("invalid DATETIME '" + std::string(text.substr(0, 64)) + "'");
  return t;
}

Result<int64_t> ParseDurationMillis(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("expected a duration like 30d, 12h, 15m, 45s or 500ms, got '" +
                           std::string(text.substr(0, 64)) + "'");
  };
  size_t i = 0;
  int64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    n = n * 10 + (text[i] - '0');
    if (n > (int64_t{1} << 40)) return bad();
    ++i;
  }
  if (i == 0) return bad();
  std::string_view unit = text.substr(i);
  int64_t mult;
  if (unit == "ms")
    mult = 1;
  else if (unit == "s")
    mult = 1000;
  else if (unit == "m")
    mult = 60 * 1000;
  else if (unit == "h")
    mult = 3600 * 1000;
  else if (unit == "d")
    mult = 86400 * 1000;
  else
    return bad();
  if (n > INT64_MAX / mult) return bad();
  return n * mult;
}

}  // namespace cellar
