#include "tally/codec/usage_records.hpp"

#include <gtest/gtest.h>

#include "tally/common/json.hpp"

namespace tally::codec {
namespace {

model::UsageBucket bucket(std::string name, std::int64_t seconds) {
  return {1'800'000'000 - 1'800'000'000 % 3600,
          {model::HolderKind::GpuDevice, "t", std::move(name), "uid-1", "h200", "nvidia.com/h200", 2},
          seconds};
}

TEST(UsageLines, RoundTrip) {
  std::vector<model::UsageBucket> buckets{bucket("a", 10), bucket("b\"quoted", 20)};
  auto decoded = decodeUsageLines(usageLines(buckets));
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(*decoded, buckets);
}

TEST(UsageLines, BadLinesAreErrorsNamingTheLine) {
  auto good = usageLine(bucket("a", 1));
  auto bad = decodeUsageLines(good + "\n{\"type\":\"usage\",\"kind\":\"VMI\"}\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().describe().find("line 2"), std::string::npos) << bad.error().describe();
  EXPECT_FALSE(decodeUsageLines("{\"type\":\"window\"}"));
  EXPECT_FALSE(decodeUsageLines(good.substr(0, good.size() / 2)));
  auto negative = good;
  negative.replace(negative.find("\"unitSeconds\":1"), 15, "\"unitSeconds\":-1");
  EXPECT_FALSE(decodeUsageLines(negative));
}

TEST(UsageConfigMap, ReadsThroughAndBucketsAndNamesTheDay) {
  std::string json = R"({"metadata":{"name":"tally-usage-20270115","namespace":"tally-system","resourceVersion":"42"},)"
                     R"("data":{"through":"2027-01-15T08:00:00Z","usage.jsonl":)" +
                     tally::jsonString(usageLines({bucket("a", 5)})) + "}}";
  auto cp = decodeUsageConfigMap(json);
  ASSERT_TRUE(cp) << cp.error().describe();
  EXPECT_EQ(cp->resourceVersion, "42");
  ASSERT_TRUE(cp->through);
  EXPECT_EQ(usageConfigMapName(*cp->through), "tally-usage-20270115");
  EXPECT_EQ(cp->buckets.size(), 1u);
  EXPECT_FALSE(decodeUsageConfigMap(R"({"metadata":{"name":"x"},"data":{"through":"soon"}})"));
}

}  // namespace
}  // namespace tally::codec
