#include "tally/common/log.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace tally {
namespace {

constexpr std::int64_t kJan2At030405678 = 1767323045678;

// Restores the process-wide settings a test changes.
struct LogSettings {
  ~LogSettings() {
    setLogSink(nullptr);
    setLogLevel(LogLevel::kInfo);
    setLogFormat(LogFormat::kJson);
  }
};

TEST(LogJson, ALineIsOneObjectWithTimestampLevelMessageAndTypedFields) {
  EXPECT_EQ(formatLogLine(LogFormat::kJson, kJan2At030405678, LogLevel::kWarning, "bind refused",
                          {{"pod", "ns/a"}, {"attempt", 2}, {"ok", false}, {"ms", 1.5}}),
            R"({"ts":"2026-01-02T03:04:05.678Z","level":"warning","msg":"bind refused",)"
            R"("pod":"ns/a","attempt":2,"ok":false,"ms":1.5})");
}

TEST(LogJson, QuotesBackslashesAndControlCharactersInMessagesKeysAndValuesAreEscaped) {
  const std::string value = std::string("tab\there\nnul") + '\0' + "\x1f" + " \xc3\xa9";
  EXPECT_EQ(formatLogLine(LogFormat::kJson, kJan2At030405678, LogLevel::kError, "bind \"failed\" at C:\\x",
                          {{"we\"ird", value}}),
            R"({"ts":"2026-01-02T03:04:05.678Z","level":"error","msg":"bind \"failed\" at C:\\x",)"
            R"("we\"ird":"tab\there\nnul\u0000\u001f )"
            "\xc3\xa9\"}");
}

TEST(LogJson, NumbersWithoutAJsonFormAreNull) {
  EXPECT_EQ(formatLogLine(LogFormat::kJson, 0, LogLevel::kInfo, "m", {{"x", std::nan("")}, {"y", 1.0 / 0.0}}),
            R"({"ts":"1970-01-01T00:00:00.000Z","level":"info","msg":"m","x":null,"y":null})");
}

TEST(LogText, PairsAreBareUnlessAReaderCouldNotTellWhereAValueEnds) {
  EXPECT_EQ(formatLogLine(LogFormat::kText, kJan2At030405678, LogLevel::kInfo, "cache synced",
                          {{"kind", "Pod"}, {"objects", 150000}, {"empty", ""}, {"eq", "a=b"}, {"nl", "a\nb"}}),
            "ts=2026-01-02T03:04:05.678Z level=info msg=\"cache synced\" kind=Pod objects=150000 "
            "empty=\"\" eq=\"a=b\" nl=\"a\\nb\"");
}

TEST(LogLevels, EntriesBelowTheLowestLevelAreDroppedAndTheRestReachTheSinkWithTheirLevel) {
  LogSettings restore;
  std::vector<std::pair<LogLevel, std::string>> lines;
  setLogSink([&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  setLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(logEnabled(LogLevel::kInfo));
  EXPECT_TRUE(logEnabled(LogLevel::kError));
  logDebug("quiet debug");
  logInfo("quiet info");
  logWarning("loud", {{"k", "v"}});
  logError("louder");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].first, LogLevel::kWarning);
  EXPECT_NE(lines[0].second.find(R"("level":"warning","msg":"loud","k":"v"})"), std::string::npos) << lines[0].second;
  EXPECT_EQ(lines[1].first, LogLevel::kError);

  setLogLevel(LogLevel::kDebug);
  setLogFormat(LogFormat::kText);
  logDebug("now written");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[2].second.find("level=debug msg=\"now written\""), std::string::npos) << lines[2].second;
}

TEST(LogLevels, NamesParseAndUnknownOnesAreRefusedQuotingTheTextAndTheChoices) {
  EXPECT_EQ(*parseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*parseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(*parseLogFormat("text"), LogFormat::kText);
  auto level = parseLogLevel("verbose");
  ASSERT_FALSE(level);
  EXPECT_EQ(level.error().describe(), "log level \"verbose\" is not one of debug, info, warning, error");
  auto format = parseLogFormat("xml");
  ASSERT_FALSE(format);
  EXPECT_EQ(format.error().describe(), "log format \"xml\" is not one of json, text");
}

TEST(LogStream, EachEntryIsOneNewlineTerminatedLine) {
  LogSettings restore;
  std::ostringstream out;
  setLogStream(&out);
  logInfo("first");
  logInfo("second", {{"n", 2}});
  setLogStream(nullptr);
  logInfo("after the stream is gone");
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find("after"), std::string::npos);
}

// Threads logging while the settings change: every line arrives whole, none
// is lost, and TSan sees no race (label concurrent).
TEST(LogConcurrent, WritersOnManyThreadsNeverInterleaveLinesWhileSettingsChange) {
  LogSettings restore;
  std::ostringstream out;
  setLogStream(&out);
  constexpr int kThreads = 8, kLines = 500;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([t] {
      for (int i = 0; i < kLines; ++i) logWarning("writer line", {{"thread", t}, {"i", i}, {"pad", "x y z"}});
    });
  }
  std::thread changer([] {
    for (int i = 0; i < 200; ++i) {
      setLogFormat(i % 2 ? LogFormat::kText : LogFormat::kJson);
      setLogLevel(i % 3 ? LogLevel::kDebug : LogLevel::kInfo);
    }
  });
  for (auto& w : writers) w.join();
  changer.join();
  setLogStream(nullptr);
  std::istringstream lines(out.str());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const bool json = line.front() == '{' && line.back() == '}' && line.find(R"("msg":"writer line")") != line.npos;
    const bool text = line.rfind("ts=", 0) == 0 && line.find("msg=\"writer line\"") != line.npos && line.size() > 11 &&
                      line.substr(line.size() - 11) == "pad=\"x y z\"";
    ASSERT_TRUE(json || text) << line;
  }
  EXPECT_EQ(count, kThreads * kLines);
}

}  // namespace
}  // namespace tally
