// The usage part the recorder writes reads back as the same part.

#include "tally/codec/usage_configmap.hpp"

#include <gtest/gtest.h>

#include "tally/codec/usage_records.hpp"

namespace tally::codec {
namespace {

constexpr model::Timestamp kDay = 1'796'083'200;  // 2026-12-01T00:00:00Z

TEST(UsageConfigMap, AWrittenPartReadsBackWithItsLabelsAndThrough) {
  UsagePart part{"tally-system", usageConfigMapName(kDay, 2), "41", kDay, 2, kDay + 3600, true, ""};
  const std::string body = encodeUsageConfigMap(part);
  auto read = decodeUsageConfigMap(body);
  ASSERT_TRUE(read) << read.error().describe() << "\n" << body;
  EXPECT_EQ(read->name, part.name);
  EXPECT_EQ(read->resourceVersion, "41");
  EXPECT_EQ(read->day, kDay);
  EXPECT_EQ(read->part, 2);
  EXPECT_EQ(read->through, kDay + 3600);
  EXPECT_TRUE(read->sealed);
  EXPECT_NE(body.find(R"("tally.dev/usage-day":")" + usageDayLabel(kDay) + "\""), std::string::npos) << body;
  EXPECT_NE(body.find(R"("tally.dev/usage-part":"2")"), std::string::npos) << body;
}

TEST(UsageConfigMap, ACreateCarriesNoResourceVersionNorSeal) {
  const std::string body = encodeUsageConfigMap({"tally-system", usageConfigMapName(kDay), "", kDay, 0, {}, false, ""});
  EXPECT_EQ(body.find("resourceVersion"), std::string::npos) << body;
  EXPECT_EQ(body.find("sealed"), std::string::npos) << body;
  auto read = decodeUsageConfigMap(body);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_FALSE(read->through.has_value());
}

}  // namespace
}  // namespace tally::codec
