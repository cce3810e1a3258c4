// The error body of Tally's own endpoints, written and read back.

#include "tally/codec/status_body.hpp"

#include <gtest/gtest.h>

namespace tally::codec {
namespace {

TEST(StatusBody, WrittenBodyReadsBackTheSame) {
  const StatusBody status{403, "Forbidden", "user \"u\" may not create gpudevices"};
  const std::string body = encodeStatusBody(status);
  EXPECT_EQ(body, R"({"code":403,"reason":"Forbidden","message":"user \"u\" may not create gpudevices"})");
  auto read = decodeStatusBody(body);
  ASSERT_TRUE(read) << read.error().describe();
  EXPECT_EQ(*read, status);
}

TEST(StatusBody, ABodyThatIsNoObjectIsRefused) {
  EXPECT_FALSE(decodeStatusBody("[1]"));
  EXPECT_FALSE(decodeStatusBody(R"({"code":"x"})"));
}

}  // namespace
}  // namespace tally::codec
