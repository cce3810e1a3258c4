#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "tally/observability/log.hpp"

using namespace tally::observability;

TEST(Log, LineIsOneJsonObjectWithTimestampLevelMessageAndFields) {
  std::string line = formatLogLine(1767323045678, Level::Warning, "bind \"failed\"",
                                   {{"pod", "ns/a"}, {"attempt", 2}, {"ok", false}, {"ms", 1.5}});
  EXPECT_EQ(line,
            "{\"ts\":\"2026-01-02T03:04:05.678Z\",\"level\":\"warning\",\"msg\":\"bind \\\"failed\\\"\","
            "\"pod\":\"ns/a\",\"attempt\":2,\"ok\":false,\"ms\":1.5}");
}

TEST(Log, ControlCharactersAreEscaped) {
  std::string out;
  appendJsonString(out, std::string_view("a\x01\n", 3));
  EXPECT_EQ(out, "\"a\\u0001\\n\"");
}

// The word-at-a-time scan must escape exactly what a byte-by-byte escape does,
// wherever the special byte falls in an eight-byte word (and next to UTF-8).
TEST(Log, EscapingAgreesWithByteByByteAtEveryPosition) {
  auto naive = [](std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
      if (c == '"') out += "\\\"";
      else if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else out += static_cast<char>(c);
    }
    return out + "\"";
  };
  const std::string specials[] = {"\"", "\\", std::string(1, '\0'), "\x1f", "\n", "\xc3\xa9", "\x7f", " "};
  for (std::size_t len = 0; len <= 24; ++len) {
    for (std::size_t at = 0; at < len; ++at) {
      for (const auto& special : specials) {
        std::string s(len, 'x');
        s.replace(at, 1, special);
        std::string out;
        appendJsonString(out, s);
        ASSERT_EQ(out, naive(s)) << "length " << len << " special at " << at;
        EXPECT_EQ(needsJsonEscape(s), out != "\"" + s + "\"") << "length " << len << " special at " << at;
      }
    }
  }
}

TEST(Log, LevelBelowThresholdIsDropped) {
  std::ostringstream sink;
  setLogStream(&sink);
  setLogLevel(Level::Warning);
  logInfo("quiet");
  logError("loud", {{"k", "v"}});
  setLogStream(nullptr);
  setLogLevel(Level::Info);
  EXPECT_EQ(sink.str().find("quiet"), std::string::npos);
  EXPECT_NE(sink.str().find("\"msg\":\"loud\",\"k\":\"v\"}\n"), std::string::npos);
}
