#include "tally/common/rfc3339.hpp"

namespace tally {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t daysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct CivilDate {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

CivilDate civilFromDays(std::int64_t days) {
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2), m, d};
}

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

TimeParseError refuse(std::string_view text, std::string_view why) {
  return {"timestamp \"" + std::string(text) + "\" is not RFC 3339: " + std::string(why)};
}

void appendDigits(std::string& out, std::int64_t value, int width) {
  char buf[24];
  int n = 0;
  do {
    buf[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  for (int i = n; i < width; ++i) out += '0';
  while (n > 0) out += buf[--n];
}

}  // namespace

Expected<UnixTime, TimeParseError> parseRfc3339(std::string_view s) {
  int year, month, day, hour, minute, second;
  if (!digits(s, 0, 4, year) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, month) || s[7] != '-' ||
      !digits(s, 8, 2, day) || (s[10] != 'T' && s[10] != 't') || !digits(s, 11, 2, hour) || s[13] != ':' ||
      !digits(s, 14, 2, minute) || s[16] != ':' || !digits(s, 17, 2, second)) {
    return refuse(s, "expected YYYY-MM-DDTHH:MM:SS");
  }
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 60) {
    return refuse(s, "a field is out of range");
  }
  if (day > kDays[month - 1] + (month == 2 && leap(year) ? 1 : 0)) return refuse(s, "no such day");
  std::size_t pos = 19;
  std::int32_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    std::int32_t scale = 100'000'000;
    for (; pos < s.size() && s[pos] >= '0' && s[pos] <= '9'; ++pos) {
      nanos += (s[pos] - '0') * scale;
      scale /= 10;
    }
    if (pos == start) return refuse(s, "no digits after the decimal point");
  }
  std::int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om) ||
        oh > 23 || om > 59) {
      return refuse(s, "the offset is not +HH:MM or -HH:MM");
    }
    offset = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return refuse(s, "no offset (Z or +HH:MM)");
  }
  if (pos != s.size()) return refuse(s, "text after the offset");
  const std::int64_t seconds = daysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 +
                               hour * 3600 + minute * 60 + second - offset;
  return UnixTime{seconds, nanos};
}

std::string formatRfc3339(UnixTime t, int fractionDigits) {
  const std::int64_t days = t.seconds >= 0 ? t.seconds / 86400 : (t.seconds - 86399) / 86400;
  const std::int64_t secs = t.seconds - days * 86400;
  const CivilDate date = civilFromDays(days);
  std::string out;
  out.reserve(32);
  if (date.year < 0) out += '-';
  appendDigits(out, date.year < 0 ? -date.year : date.year, 4);
  out += '-';
  appendDigits(out, date.month, 2);
  out += '-';
  appendDigits(out, date.day, 2);
  out += 'T';
  appendDigits(out, secs / 3600, 2);
  out += ':';
  appendDigits(out, (secs / 60) % 60, 2);
  out += ':';
  appendDigits(out, secs % 60, 2);
  if (fractionDigits > 0) {
    if (fractionDigits > 9) fractionDigits = 9;
    std::int32_t fraction = t.nanos;
    for (int i = fractionDigits; i < 9; ++i) fraction /= 10;
    out += '.';
    appendDigits(out, fraction, fractionDigits);
  }
  out += 'Z';
  return out;
}

UnixTime toUnixTime(std::chrono::system_clock::time_point t) {
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  std::int64_t seconds = nanos / 1'000'000'000;
  std::int64_t rest = nanos % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  return {seconds, static_cast<std::int32_t>(rest)};
}

}  // namespace tally
