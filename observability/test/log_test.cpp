#include <gtest/gtest.h>

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

TEST(Log, LevelNamesParseAndUnknownOnesAreRefusedWithTheName) {
  EXPECT_EQ(*parseLevel("debug"), Level::Debug);
  EXPECT_EQ(*parseLevel("warning"), Level::Warning);
  auto bad = parseLevel("verbose");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().describe(), "unknown level verbose");
}
