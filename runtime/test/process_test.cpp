// The process glue both binaries share.

#include "tally/runtime/process.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "tally/common/log.hpp"

namespace tally::runtime::process {
namespace {

using namespace std::chrono_literals;

TEST(ProcessFlags, DurationsTakeTheUsualUnitsAndABareNumberIsSeconds) {
  EXPECT_EQ(*parseDuration("250ms"), 250ms);
  EXPECT_EQ(*parseDuration("10s"), 10s);
  EXPECT_EQ(*parseDuration("2m"), 120s);
  EXPECT_EQ(*parseDuration("1h"), 3600s);
  EXPECT_EQ(*parseDuration("1.5"), 1500ms);
  for (const char* bad : {"", "fast", "10parsecs", "-1s"}) {
    auto parsed = parseDuration(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_NE(parsed.error().message.find(std::string("\"") + bad + "\""), std::string::npos) << parsed.error().message;
  }
}

TEST(ProcessFlags, ABadDurationFlagThrowsNamingTheFlagAndItsText) {
  EXPECT_EQ(durationFlag("--read-timeout", "250ms"), 250ms);
  try {
    durationFlag("--read-timeout", "soon");
    FAIL() << "a bad duration was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.starts_with("--read-timeout: ")) << what;
    EXPECT_NE(what.find("\"soon\""), std::string::npos) << what;
  }
}

TEST(ProcessLogging, TheLevelAndFormatFlagsSetTheProcessLog) {
  std::ostringstream out;
  setLogStream(&out);
  ASSERT_TRUE(setUpLogging("debug", "text"));
  logDebug("informer listing", {{"contentType", "application/vnd.kubernetes.protobuf"}});
  ASSERT_TRUE(setUpLogging("warning"));
  logInfo("not written at warning");
  logWarning("informer watch ended", {{"resource", "pods"}});
  setLogStream(nullptr);
  const std::string text = out.str();
  EXPECT_NE(text.find("level=debug msg=\"informer listing\" contentType=application/vnd.kubernetes.protobuf\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("level":"warning","msg":"informer watch ended","resource":"pods"})"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("not written at warning"), std::string::npos) << text;
}

TEST(ProcessLogging, ARefusedFlagNamesItsTextAndChangesNothing) {
  ASSERT_TRUE(setUpLogging("error"));
  auto level = setUpLogging("chatty");
  ASSERT_FALSE(level);
  EXPECT_NE(level.error().describe().find("\"chatty\""), std::string::npos) << level.error().describe();
  auto format = setUpLogging("debug", "xml");
  ASSERT_FALSE(format);
  EXPECT_NE(format.error().describe().find("\"xml\""), std::string::npos) << format.error().describe();
  EXPECT_FALSE(logEnabled(LogLevel::kWarning));
  ASSERT_TRUE(setUpLogging("info"));
}

TEST(ProcessClient, AMissingKubeconfigIsAnErrorNamingIt) {
  auto client = connect({"/nonexistent/kubeconfig", "", "tally-test"});
  ASSERT_FALSE(client);
  EXPECT_NE(client.error().describe().find("/nonexistent/kubeconfig"), std::string::npos) << client.error().describe();
}

}  // namespace
}  // namespace tally::runtime::process
