// The process glue both binaries share.

#include "tally/runtime/process.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "tally/observability/log.hpp"
#include "tally/runtime/log.hpp"

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

TEST(ProcessLogging, RuntimeLogsReachTheStructuredLogTaggedAsRuntime) {
  std::ostringstream out;
  observability::setLogStream(&out);
  ASSERT_TRUE(setUpLogging("debug"));
  log(LogLevel::kWarning, "informer pods: watch ended");
  log(LogLevel::kDebug, "informer pods: listing as application/vnd.kubernetes.protobuf");
  ASSERT_TRUE(setUpLogging("warning"));
  log(LogLevel::kInfo, "not written at warning");
  observability::setLogStream(nullptr);
  const std::string text = out.str();
  EXPECT_NE(text.find(R"("level":"warning","msg":"informer pods: watch ended","component":"runtime")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("listing as application/vnd.kubernetes.protobuf"), std::string::npos) << text;
  EXPECT_EQ(text.find("not written at warning"), std::string::npos) << text;
  EXPECT_FALSE(setUpLogging("chatty"));
}

TEST(ProcessClient, AMissingKubeconfigIsAnErrorNamingIt) {
  auto client = connect({"/nonexistent/kubeconfig", "", "tally-test"});
  ASSERT_FALSE(client);
  EXPECT_NE(client.error().describe().find("/nonexistent/kubeconfig"), std::string::npos) << client.error().describe();
}

}  // namespace
}  // namespace tally::runtime::process
