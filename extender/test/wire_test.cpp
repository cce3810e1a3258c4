#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <deque>
#include <random>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/common/json.hpp"
#include "tally/extender/wire.hpp"

using namespace tally::extender;
using namespace tally::extender::testing;
using tally::model::testing::kH200;

namespace {
std::string pod() { return podJson("tenant-a", "vm-launcher", "uid-1", 2); }
}  // namespace

TEST(Wire, NodeNamesAndPodAreRead) {
  std::string body = extenderArgs(pod(), {"n1", "n2"});
  auto args = wire::parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  EXPECT_EQ(args.value.nodeNames, (std::vector<std::string_view>{"n1", "n2"}));
  EXPECT_FALSE(args.value.fromNodeList);
  EXPECT_EQ(args.value.pod.name, "vm-launcher");
  EXPECT_EQ(args.value.pod.uid, "uid-1");
  ASSERT_EQ(args.value.pod.containers.size(), 1u);
  EXPECT_EQ(args.value.pod.containers[0].get(kH200), 2);
}

// Names are views into the body; one written with an escape is unescaped into
// owned storage, and the answer then escapes every name again.
TEST(Wire, EscapedNodeNamesAreUnescapedAndEscapedBackInTheAnswer) {
  std::string body = R"({"Pod":)" + pod() + R"(,"NodeNames":[ "plain" , "with\u0022quote", "tab\there"  ]})";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  EXPECT_EQ(args.value.nodeNames, (std::vector<std::string_view>{"plain", "with\"quote", "tab\there"}));
  EXPECT_FALSE(args.value.plainNames);
  wire::FilterResult f;
  f.passed = args.value.nodeNames;
  f.plainNames = args.value.plainNames;
  EXPECT_NE(wire::encode(f).find(R"("NodeNames":["plain","with\"quote","tab\there"])"), std::string::npos)
      << wire::encode(f);
  std::string plain = R"({"Pod":)" + pod() + R"(,"NodeNames":[ "n1",
    "n2"  ,"n3"]})";
  auto fast = wire::parseExtenderArgs(plain);
  ASSERT_TRUE(fast.ok()) << fast.errors.front().message;
  EXPECT_TRUE(fast.value.plainNames);
  EXPECT_EQ(fast.value.nodeNames, (std::vector<std::string_view>{"n1", "n2", "n3"}));
  EXPECT_GE(fast.value.nodeNames[0].data(), plain.data());
  EXPECT_LT(fast.value.nodeNames[0].data(), plain.data() + plain.size()) << "a plain name points into the body";
  // Escapes that decode to plain text keep the names plain.
  std::string unescaped = R"({"Pod":)" + pod() + R"(,"NodeNames":["\u0041b", null]})";
  auto careful = wire::parseExtenderArgs(unescaped);
  ASSERT_TRUE(careful.ok()) << careful.errors.front().message;
  EXPECT_EQ(careful.value.nodeNames, (std::vector<std::string_view>{"Ab", ""}));
  EXPECT_TRUE(careful.value.plainNames);
}

TEST(Wire, KeysMatchCaseInsensitivelyLikeGo) {
  std::string body = R"({"pod":)" + pod() + R"(,"nodenames":["a"],"NODES":null})";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  EXPECT_EQ(args.value.nodeNames, std::vector<std::string_view>{"a"});
  EXPECT_EQ(args.value.pod.ns, "tenant-a");
}

TEST(Wire, FullNodeListYieldsNamesAndRawObjects) {
  std::string body = extenderArgsWithNodeList(pod(), {"n1", "n2"});
  auto args = wire::parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  EXPECT_TRUE(args.value.fromNodeList);
  EXPECT_EQ(args.value.nodeNames, (std::vector<std::string_view>{"n1", "n2"}));
  ASSERT_EQ(args.value.rawNodes.size(), 2u);
  EXPECT_EQ(args.value.rawNodes[0].substr(0, 25), R"({"metadata":{"name":"n1",)");
  EXPECT_EQ(args.value.rawNodes[1].back(), '}');
}

TEST(Wire, FilterResultInNodeListFormEchoesTheNodeObjects) {
  std::string body = extenderArgsWithNodeList(pod(), {"n1"});
  auto args = wire::parseExtenderArgs(body);
  ASSERT_TRUE(args.ok());
  wire::FilterResult r;
  r.asNodeList = true;
  r.rawPassed = args.value.rawNodes;
  std::string json = wire::encode(r);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_FALSE(p.parse(json).get(doc)) << json;
  std::string_view name;
  ASSERT_FALSE(doc["Nodes"]["items"].at(0)["metadata"]["name"].get(name));
  EXPECT_EQ(name, "n1");
}

TEST(Wire, MalformedJsonIsAnErrorNamingThePlace) {
  std::string body = R"({"Pod":)" + pod() + R"(,"NodeNames":["a",)";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.errors.front().kind, "json");
  EXPECT_NE(args.errors.front().message.find("ExtenderArgs"), std::string::npos) << args.errors.front().message;
}

TEST(Wire, WrongTypeNamesTheField) {
  std::string body = R"({"Pod":)" + pod() + R"(,"NodeNames":["a",7]})";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.errors.front().kind, "schema");
  EXPECT_EQ(args.errors.front().message, "ExtenderArgs.NodeNames[1]: expected a string");
}

TEST(Wire, MissingPodIsRefused) {
  std::string body = R"({"NodeNames":["a"]})";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.errors.front().message, "ExtenderArgs.Pod: missing");
}

TEST(Wire, BadPodQuantityIsReportedThroughTheCodec) {
  std::string body =
      R"({"Pod":{"metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"resources":{"requests":{")" +
      std::string(kH200) + R"(":"half"}}}]}},"NodeNames":[]})";
  auto args = wire::parseExtenderArgs(body);
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.errors.front().kind, "pod");
  EXPECT_NE(args.errors.front().message.find("ExtenderArgs.Pod"), std::string::npos);
}

TEST(Wire, GarbageAndTrailingContentAreRefused) {
  for (std::string body : {std::string("not json"), std::string("[1,2]"), std::string(""), std::string("{} {}"),
                           std::string("{\"Pod\":" + pod() + "} trailing")}) {
    auto args = wire::parseExtenderArgs(body);
    EXPECT_FALSE(args.ok()) << body;
  }
}

// NodeNames closing the body (kube-scheduler's order) is read by the
// extender's own scanner, which then checks the rest of the body itself: the
// answers must be those of the general path, and what is not JSON still fails.
TEST(Wire, NodeNamesEndingTheBodyReadAsAnywhereElse) {
  const std::string head = R"({"Pod":)" + pod() + R"(,"Nodes":null,"NodeNames":)";
  struct Case {
    std::string tail;
    std::vector<std::string_view> names;  // empty with ok = false: refused
    bool ok;
  };
  const std::vector<Case> cases = {
      {R"(["n1","n2"]})", {"n1", "n2"}, true},
      {"[ \"n1\" ,\n \"n2\" ] } \n", {"n1", "n2"}, true},  // whitespace anywhere
      {R"([]})", {}, true},
      {R"(["n1","n2"],"Extra":1})", {"n1", "n2"}, true},  // not last: the general path
      {R"(["n1"]}})", {}, false},                         // one brace too many
      {R"(["n1"]} x)", {}, false},                        // content after the object
      {R"(["n1"])", {}, false},                           // the object never closes
      {R"(["n1",]})", {}, false},                         // a trailing comma
      {R"(["n1" "n2"]})", {}, false},                     // a missing comma
      {R"(["n1",2]})", {}, false},                        // not a string
  };
  for (const Case& c : cases) {
    std::string body = head + c.tail;
    auto args = wire::parseExtenderArgs(body);
    EXPECT_EQ(args.ok(), c.ok) << body;
    if (c.ok) {
      EXPECT_EQ(args.value.nodeNames, c.names) << body;
      EXPECT_TRUE(args.value.plainNames) << body;
      EXPECT_EQ(args.value.pod.name, "vm-launcher") << body;
    }
  }
  // Escaped names closing the body go the general way, and come out unescaped.
  std::string escaped = head + R"(["a\u0062c"]})";
  auto args = wire::parseExtenderArgs(escaped);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  EXPECT_EQ(args.value.nodeNames, (std::vector<std::string_view>{"abc"}));
  // Without the Pod before them, the names alone do not make a request.
  std::string podless = R"({"NodeNames":["n1"]})";
  EXPECT_FALSE(wire::parseExtenderArgs(podless).ok());
}

TEST(Wire, PreemptionArgsReadMetaVictimsAndFullVictims) {
  std::string meta = R"({"Pod":)" + pod() +
                     R"(,"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"a"},{"uid":"b"}],"NumPDBViolations":1}}})";
  auto args = wire::parsePreemptionArgs(meta);
  ASSERT_TRUE(args.ok()) << args.errors.front().message;
  ASSERT_EQ(args.value.victims.size(), 1u);
  EXPECT_EQ(args.value.victims[0].first, "n1");
  EXPECT_EQ(args.value.victims[0].second.podUids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(args.value.victims[0].second.numPdbViolations, 1);

  std::string full = R"({"Pod":)" + pod() + R"(,"NodeNameToVictims":{"n2":{"Pods":[)" +
                     podJson("t", "victim", "uid-v", 1) + R"(],"NumPDBViolations":0}}})";
  auto fullArgs = wire::parsePreemptionArgs(full);
  ASSERT_TRUE(fullArgs.ok()) << fullArgs.errors.front().message;
  ASSERT_EQ(fullArgs.value.victims.size(), 1u);
  EXPECT_EQ(fullArgs.value.victims[0].second.podUids, std::vector<std::string>{"uid-v"});
}

TEST(Wire, BindingArgsNeedPodNameAndNode) {
  std::string ok = R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n1"})";
  auto args = wire::parseBindingArgs(ok);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(args.value.podUid, "u");
  EXPECT_EQ(args.value.node, "n1");
  std::string missing = R"({"PodName":"p","PodNamespace":"ns"})";
  auto bad = wire::parseBindingArgs(missing);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.errors.front().message, "ExtenderBindingArgs.Node: missing");
}

// A message shared by many nodes is escaped once and copied; messages that
// only look alike (same length, other bytes) must not be taken for it.
TEST(Wire, SharedMessagesAreWrittenOncePerNodeCorrectly) {
  const std::string full = "node(s) with 0 of 8 \"x\" free";
  const std::string other = "node(s) with 1 of 8 \"x\" free";
  wire::FilterResult f;
  for (int i = 0; i < 40; ++i) f.failed.emplace_back(i % 3 == 0 ? "odd" : "even", i % 3 == 0 ? other : full);
  std::string out = wire::encode(f);
  std::string expectedFailed;
  for (int i = 0; i < 40; ++i) {
    if (i) expectedFailed += ',';
    expectedFailed +=
        i % 3 == 0 ? R"("odd":"node(s) with 1 of 8 \"x\" free")" : R"("even":"node(s) with 0 of 8 \"x\" free")";
  }
  EXPECT_NE(out.find("\"FailedNodes\":{" + expectedFailed + "}"), std::string::npos) << out;
}

TEST(Wire, ResultsUseGoFieldNames) {
  wire::FilterResult f;
  f.passed = {"a"};
  f.failed = {{"b", "node b has 0 of 8 \"free\""}};
  f.unresolvable = {{"c", "wrong mode"}};
  EXPECT_EQ(wire::encode(f), R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{"b":"node b has 0 of 8 \"free\""},)"
                             R"("FailedAndUnresolvableNodes":{"c":"wrong mode"},"Error":""})");
  EXPECT_EQ(wire::encode(std::vector<wire::HostPriority>{{"a", 7}}), R"([{"Host":"a","Score":7}])");
  EXPECT_EQ(wire::encode(std::vector<wire::HostPriority>{{"a", 7}, {"b", 10}}, true),
            R"([{"Host":"a","Score":7},{"Host":"b","Score":10}])");
  EXPECT_EQ(wire::encode(std::vector<wire::HostPriority>{{"q\"", 3}}), R"([{"Host":"q\"","Score":3}])");
  // A host scored 0 is left out (kube-scheduler adds nothing for an unlisted host).
  EXPECT_EQ(wire::encode(std::vector<wire::HostPriority>{{"a", 0}, {"b", 4}, {"c", 0}}, true),
            R"([{"Host":"b","Score":4}])");
  EXPECT_EQ(wire::encode(std::vector<wire::HostPriority>{{"a", 0}}), "[]");
  wire::PreemptionResult p;
  p.victims.push_back({"n1", {{"u1"}, 0}});
  EXPECT_EQ(wire::encode(p), R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u1"}],"NumPDBViolations":0}}})");
  EXPECT_EQ(wire::encodeError(""), R"({"Error":""})");
}

namespace {

// A node name: mostly what kube-scheduler sends, sometimes one that JSON must
// escape (quotes, backslashes, control bytes) or multi-byte UTF-8; unique by `i`.
std::string randomName(std::mt19937_64& rng, std::size_t i) {
  static const std::vector<std::string> pieces = {"gpu",  "-",  "node", ".",  "rack7",
                                                  "\"",   "\\", "\n",   "\t", "\x01",
                                                  "\x1f", "é",  "日本", "/",  "a-long-segment-of-a-name"};
  std::string name;
  const std::size_t parts = rng() % 5;
  for (std::size_t k = 0; k < parts; ++k) {
    const std::size_t p = rng() % pieces.size();
    name += rng() % 4 == 0 ? pieces[p] : pieces[p % 5];
  }
  return name + std::to_string(i);
}

std::vector<std::string> strings(simdjson::dom::array array) {
  std::vector<std::string> out;
  for (simdjson::dom::element e : array) out.emplace_back(std::string_view(e.get_string().value()));
  return out;
}

std::vector<std::pair<std::string, std::string>> members(simdjson::dom::object object) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [key, value] : object) out.emplace_back(std::string(key), std::string(value.get_string().value()));
  return out;
}

template <class Views>
std::vector<std::pair<std::string, std::string>> owned(const Views& failures) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, message] : failures) out.emplace_back(std::string(name), std::string(message));
  return out;
}

}  // namespace

// Whatever the names, whichever messages are shared: the encoded answer is
// JSON that reads back to the lists it was written from.
TEST(Wire, EncodedFilterResultsParseBackToTheirLists) {
  std::mt19937_64 rng(28);
  simdjson::dom::parser parser;
  const std::vector<std::string> reasons = {"node(s) with 0 of 8 \"h200\" free", "wrong mode\n(pod-hami)", "cordoned",
                                            "", "namespace tenant-a \\ under no Organization"};
  for (int round = 0; round < 400; ++round) {
    std::deque<std::string> names;
    wire::FilterResult f;
    const std::size_t nodes = rng() % 60;
    for (std::size_t i = 0; i < nodes; ++i) {
      const std::string_view name = names.emplace_back(randomName(rng, i));
      // Shared: one message for many nodes (as filterNodes writes them); or a copy of its own.
      std::string_view message = f.messages.emplace_back(reasons[rng() % reasons.size()]);
      if (rng() % 2) message = f.messages[rng() % f.messages.size()];
      switch (rng() % 3) {
        case 0: f.passed.push_back(name); break;
        case 1: f.failed.emplace_back(name, message); break;
        default: f.unresolvable.emplace_back(name, message);
      }
    }
    f.plainNames =
        std::none_of(names.begin(), names.end(), [](const std::string& n) { return tally::needsJsonEscape(n); });
    if (round % 5 == 0) f.error = reasons[rng() % reasons.size()];
    const std::string json = wire::encode(f);
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
    EXPECT_TRUE(doc["Nodes"].is_null());
    EXPECT_EQ(strings(doc["NodeNames"].get_array().value()), std::vector<std::string>(f.passed.begin(), f.passed.end()))
        << json;
    EXPECT_EQ(members(doc["FailedNodes"].get_object().value()), owned(f.failed)) << json;
    EXPECT_EQ(members(doc["FailedAndUnresolvableNodes"].get_object().value()), owned(f.unresolvable)) << json;
    EXPECT_EQ(std::string_view(doc["Error"].get_string().value()), f.error) << json;
  }
}

// Hosts scored 0 are left out; every other score, in range or not, reads back
// as written, whether the hosts come one by one or all at once.
TEST(Wire, EncodedHostPrioritiesParseBackToTheListedScores) {
  std::mt19937_64 rng(5);
  simdjson::dom::parser parser;
  for (int round = 0; round < 400; ++round) {
    std::deque<std::string> names;
    std::vector<std::string_view> hosts;
    std::vector<int> scores;
    std::vector<wire::HostPriority> priorities;
    std::vector<std::pair<std::string, std::int64_t>> listed;
    const std::size_t nodes = rng() % 60;
    for (std::size_t i = 0; i < nodes; ++i) {
      hosts.push_back(names.emplace_back(randomName(rng, i)));
      scores.push_back(rng() % 7 == 0 ? static_cast<int>(rng() % 2000) - 1000 : static_cast<int>(rng() % 11));
      priorities.push_back({hosts.back(), scores.back()});
      if (wire::listedScore(scores.back())) listed.emplace_back(names.back(), scores.back());
    }
    const bool plain =
        std::none_of(hosts.begin(), hosts.end(), [](std::string_view h) { return tally::needsJsonEscape(h); });
    wire::HostPriorityWriter writer(plain);
    writer.addAll(hosts, scores);
    const std::string all = std::move(writer).finish();
    EXPECT_EQ(all, wire::encode(priorities, plain));
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(all).get(doc), simdjson::SUCCESS) << all;
    std::vector<std::pair<std::string, std::int64_t>> read;
    const simdjson::dom::array entries = doc.get_array().value();
    for (simdjson::dom::element entry : entries) {
      read.emplace_back(std::string(entry["Host"].get_string().value()), entry["Score"].get_int64().value());
    }
    EXPECT_EQ(read, listed) << all;
  }
}

// The writers of one thread share their scratch; a second one alive at the
// same time must not write into the first one's answer.
TEST(Wire, TwoFilterResultWritersOnOneThreadKeepTheirAnswersApart) {
  wire::FilterResultWriter outer(true);
  outer.fail("a", outer.message("outer reason"));
  {
    wire::FilterResultWriter inner(true);
    inner.fail("b", inner.message("inner reason"));
    inner.pass("c");
    EXPECT_EQ(std::move(inner).finish(), R"({"Nodes":null,"NodeNames":["c"],"FailedNodes":{"b":"inner reason"},)"
                                         R"("FailedAndUnresolvableNodes":{},"Error":""})");
  }
  outer.failForGood("d", outer.message("gone \"for good\""));
  outer.pass("e");
  EXPECT_EQ(std::move(outer).finish("late"),
            R"({"Nodes":null,"NodeNames":["e"],"FailedNodes":{"a":"outer reason"},)"
            R"("FailedAndUnresolvableNodes":{"d":"gone \"for good\""},"Error":"late"})");
}
