#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "tally/common/json.hpp"

using namespace tally;

namespace {

// The escape written one byte at a time, the way the rule reads.
std::string escapedByteByByte(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace

TEST(JsonString, ControlCharactersAreEscaped) {
  std::string out;
  appendJsonString(out, std::string_view("a\x01\n", 3));
  EXPECT_EQ(out, "\"a\\u0001\\n\"");
}

TEST(JsonString, QuotesBackslashesAndNamedControlsUseTheirShortForms) {
  EXPECT_EQ(jsonString("say \"hi\"\\\r\t"), R"("say \"hi\"\\\r\t")");
  EXPECT_EQ(jsonString(std::string_view("\0\x1f\x7f", 3)), "\"\\u0000\\u001f\x7f\"");
  EXPECT_EQ(jsonString(""), "\"\"");
}

TEST(JsonString, Utf8IsCopiedAsItIs) {
  EXPECT_EQ(jsonString("gp\xc3\xbc-\xe2\x82\xac"), "\"gp\xc3\xbc-\xe2\x82\xac\"");
}

TEST(JsonString, EscapedAppendsNoQuotes) {
  std::string out = "x";
  appendJsonEscaped(out, "a\"b");
  EXPECT_EQ(out, "xa\\\"b");
}

// The word-at-a-time scan must escape exactly what a byte-by-byte escape does,
// wherever the special byte falls in an eight-byte word (and next to UTF-8).
TEST(JsonString, EscapingAgreesWithByteByByteAtEveryPosition) {
  const std::string specials[] = {"\"", "\\", std::string(1, '\0'), "\x1f", "\n", "\xc3\xa9", "\x7f", " "};
  for (std::size_t len = 0; len <= 24; ++len) {
    for (std::size_t at = 0; at < len; ++at) {
      for (const auto& special : specials) {
        std::string s(len, 'x');
        s.replace(at, 1, special);
        std::string out;
        appendJsonString(out, s);
        ASSERT_EQ(out, escapedByteByByte(s)) << "length " << len << " special at " << at;
        EXPECT_EQ(needsJsonEscape(s), out != "\"" + s + "\"") << "length " << len << " special at " << at;
      }
    }
  }
}

// Random strings over every byte value, mostly plain with a few specials, so
// both the eight-byte fast path and the byte loop are taken and left often.
TEST(JsonString, FastPathAgreesWithByteByByteOnRandomStrings) {
  std::mt19937 rng(20260102);
  std::uniform_int_distribution<int> length(0, 80);
  std::uniform_int_distribution<int> anyByte(0, 255);
  std::uniform_int_distribution<int> plainByte(0x20, 0x7e);
  std::uniform_int_distribution<int> percent(0, 99);
  for (int round = 0; round < 20000; ++round) {
    const int density = percent(rng) % 4 == 0 ? 30 : 2;
    std::string s(static_cast<std::size_t>(length(rng)), ' ');
    for (char& c : s) {
      c = static_cast<char>(percent(rng) < density ? anyByte(rng) : plainByte(rng));
      if (c == '"' || c == '\\') c = 'q';
    }
    // A few quotes and backslashes placed on purpose, not only by chance.
    if (!s.empty() && percent(rng) < 10) s[static_cast<std::size_t>(anyByte(rng)) % s.size()] = '"';
    if (!s.empty() && percent(rng) < 10) s[static_cast<std::size_t>(anyByte(rng)) % s.size()] = '\\';
    const std::string expected = escapedByteByByte(s);
    ASSERT_EQ(jsonString(s), expected) << "round " << round;
    ASSERT_EQ(needsJsonEscape(s), expected != "\"" + s + "\"") << "round " << round;
  }
}

TEST(JsonWriter, SeparatesElementsAndKeysWithoutTrailingCommas) {
  JsonWriter json;
  json.beginObject().field("name", "a\"b").field("count", std::int64_t{-3}).field("ok", true);
  json.key("list").beginArray().value("x").value(std::int64_t{1}).beginObject().endObject().endArray();
  json.key("empty").beginArray().endArray();
  json.endObject();
  EXPECT_EQ(json.str(), R"({"name":"a\"b","count":-3,"ok":true,"list":["x",1,{}],"empty":[]})");
}

TEST(JsonWriter, TopLevelArrayOfObjects) {
  JsonWriter json;
  json.beginArray().beginObject().field("k", "v").endObject().beginObject().endObject().endArray();
  EXPECT_EQ(json.str(), R"([{"k":"v"},{}])");
}

namespace tally {
namespace {

TEST(TruncatedText, CutsOnACharacterBoundaryAndMarksTheCut) {
  EXPECT_EQ(truncatedText("short", 10), "short");
  EXPECT_EQ(truncatedText("exactly10!", 10), "exactly10!");
  EXPECT_EQ(truncatedText("0123456789abc", 10), "0123456...");
  // "é" is two bytes: a cut between them would leave half a character.
  const std::string accents = "ab\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
  std::string cut = truncatedText(accents, 7);
  EXPECT_EQ(cut, "ab\xc3\xa9...");
  EXPECT_LE(cut.size(), 7u);
  for (std::size_t max = 4; max < accents.size(); ++max) {
    std::string t = truncatedText(accents, max);
    EXPECT_LE(t.size(), max);
    // Never ends inside a character: the byte before "..." is not a lead byte.
    const unsigned char last = static_cast<unsigned char>(t[t.size() - 4]);
    EXPECT_NE(last & 0xE0, 0xC0) << max;
  }
}

}  // namespace
}  // namespace tally
