// The flags both binaries read their cluster state by: the tenancy policy.

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "tally/state/source_flags.hpp"

namespace tally::state {
namespace {

Expected<SourceSettings, std::string> parsed(std::vector<std::string> args) {
  CLI::App app;
  SourceFlags flags;
  addSourceFlags(app, flags, "the doors");
  std::vector<const char*> argv{"tally"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return sourceSettings(flags);
}

TEST(SourceFlags, UnorganizedGpuUseIsRefusedByDefaultOutsideTheSystemNamespaces) {
  auto s = parsed({});
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->tenancy.unorganized, model::UnorganizedGpuPolicy::Refuse);
  EXPECT_TRUE(s->tenancy.systemNamespaces.contains("kube-system"));
  EXPECT_TRUE(s->tenancy.systemNamespaces.contains("tally-system"));
}

TEST(SourceFlags, PolicyAndSystemNamespacesAreRead) {
  auto s = parsed({"--unorganized-gpu-namespaces=allow", "--system-namespaces= ops, gpu-probes ,"});
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->tenancy.unorganized, model::UnorganizedGpuPolicy::Allow);
  EXPECT_EQ(s->tenancy.systemNamespaces, (std::set<std::string, std::less<>>{"ops", "gpu-probes"}));
}

TEST(SourceFlags, BadValuesNameTheFlagAndTheValue) {
  auto policy = parsed({"--unorganized-gpu-namespaces=maybe"});
  ASSERT_FALSE(policy);
  EXPECT_NE(policy.error().find("--unorganized-gpu-namespaces: \"maybe\""), std::string::npos) << policy.error();
  auto name = parsed({"--system-namespaces=kube-system,Bad_Name"});
  ASSERT_FALSE(name);
  EXPECT_NE(name.error().find("--system-namespaces: \"Bad_Name\" is not a namespace name"), std::string::npos)
      << name.error();
}

TEST(SourceFlags, UnwatchedOrganizationsWithTheRefusePolicyIsAConfigurationError) {
  auto s = parsed({"--watch-organizations=false"});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("--unorganized-gpu-namespaces=allow"), std::string::npos) << s.error();
  EXPECT_TRUE(parsed({"--watch-organizations=false", "--unorganized-gpu-namespaces=allow"}));
}

}  // namespace
}  // namespace tally::state
