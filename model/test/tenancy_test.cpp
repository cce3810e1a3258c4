// Quantities no tenant's quota can attribute (seed 000: stop if any quantity
// cannot be attributed): GPU use in a namespace no Organization holds, and a
// tenant's use of a pool its HRQ names no quota for.

#include <gtest/gtest.h>

#include <algorithm>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/catalog.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct Unorganized : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    c.tenancy = TenancyPolicy{};  // the product's default: refuse
    auto cls = passthroughClass();
    cls.gateDecided = true;
    cls.gateOpen = true;
    put(c, cls);
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 8));
    put(c, ns("acme"));
    put(c, ns("acme-dev", {"acme"}));
    put(c, org("acme"));
    put(c, hrq("acme", "plan-quota", key, 4));
    put(c, ns("stray"));
    put(c, ns("kube-system"));
  }
  Decision order(std::string_view nsName, std::int64_t count = 1) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkDeviceOrder(c, view, catalogOrder(nsName, "h200", count));
  }
  std::vector<Refusal> podWide(const Pod& p) {
    TotalsCapacityView view(c, computeUsage(c));
    return podDemand(c, view, p).podWide;
  }
  std::vector<Finding> audit() { return auditPool(c, c.classes.at("h200")); }
  static bool hasCode(const std::vector<Refusal>& refusals, Code code) {
    return std::any_of(refusals.begin(), refusals.end(), [&](const Refusal& r) { return r.code == code; });
  }
  static const Finding* find(const std::vector<Finding>& all, FindingCode code) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Finding& f) { return f.code == code; });
    return it == all.end() ? nullptr : &*it;
  }
};

TEST_F(Unorganized, AnOrderInANamespaceUnderNoOrganizationIsRefusedNamingIt) {
  Decision d = order("stray");
  ASSERT_FALSE(d.allowed());
  EXPECT_TRUE(hasCode(d.refusals, Code::NamespaceUnorganized)) << d.summary();
  EXPECT_NE(d.summary().find("namespace stray is under no Organization"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("--unorganized-gpu-namespaces=refuse"), std::string::npos) << d.summary();
}

TEST_F(Unorganized, AnOrganizationsNamespaceAndItsDescendantsAreAttributed) {
  EXPECT_TRUE(order("acme").allowed()) << order("acme").summary();
  EXPECT_TRUE(order("acme-dev").allowed()) << order("acme-dev").summary();
  EXPECT_FALSE(unattributedNamespace(c, "acme-dev").has_value());
}

TEST_F(Unorganized, SystemNamespacesAndTheAllowPolicyAreNotRefused) {
  EXPECT_FALSE(hasCode(order("kube-system").refusals, Code::NamespaceUnorganized)) << order("kube-system").summary();
  c.tenancy.systemNamespaces.insert("stray");
  EXPECT_FALSE(hasCode(order("stray").refusals, Code::NamespaceUnorganized));
  c.tenancy = TenancyPolicy{};
  c.tenancy.unorganized = UnorganizedGpuPolicy::Allow;
  EXPECT_FALSE(hasCode(order("stray").refusals, Code::NamespaceUnorganized));
}

TEST_F(Unorganized, ARawPodIsRefusedOnEveryNodeAndAPodWithoutGpusIsNot) {
  Pod gpu = gpuPod("stray", "train", kH200, 1);
  gpu.phase = PodPhase::Pending;
  auto wide = podWide(gpu);
  ASSERT_TRUE(hasCode(wide, Code::NamespaceUnorganized));
  EXPECT_NE(wide.front().message.find("pod stray/train"), std::string::npos) << wide.front().message;
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_NE(filterNode(c, view, podDemand(c, view, gpu), c.nodes.at("gpu-1")).verdict, Verdict::Fits);

  Pod cpu = gpuPod("stray", "web", "cpu", 1);
  cpu.phase = PodPhase::Pending;
  EXPECT_FALSE(hasCode(podWide(cpu), Code::NamespaceUnorganized));
  Pod tenant = gpuPod("acme-dev", "train", kH200, 1);
  tenant.phase = PodPhase::Pending;
  EXPECT_FALSE(hasCode(podWide(tenant), Code::NamespaceUnorganized));
}

TEST_F(Unorganized, WhyNoneIsSeenIsNamedWhenOrganizationsAreUnwatchedOrUnsynced) {
  c.markNotConfigured(Kind::Organization);
  c.organizations.clear();
  ASSERT_TRUE(unattributedNamespace(c, "acme").has_value());
  EXPECT_NE(unattributedNamespace(c, "acme")->find("Organizations are not watched"), std::string::npos);
  Cluster unsynced = syncedCluster();
  unsynced.tenancy = TenancyPolicy{};
  unsynced.caches.erase(Kind::Organization);
  put(unsynced, ns("acme"));
  ASSERT_TRUE(unattributedNamespace(unsynced, "acme").has_value());
  EXPECT_NE(unattributedNamespace(unsynced, "acme")->find("not synced yet"), std::string::npos);
  EXPECT_FALSE(unattributedNamespace(unsynced, "absent").has_value()) << "left to the budget rule";
}

TEST_F(Unorganized, UseOutsideEveryOrganizationIsAFailingFindingThatClosesTheGate) {
  put(c, gpuPod("stray", "around", kH200, 2, "gpu-1"));
  put(c, gpuPod("kube-system", "probe", kH200, 1, "gpu-1"));
  put(c, gpuPod("acme-dev", "train", kH200, 1, "gpu-1"));
  auto all = audit();
  const Finding* f = find(all, FindingCode::UnorganizedGpuUse);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->subject, "namespace/stray");
  EXPECT_NE(f->message.find("uses 2 unit(s)"), std::string::npos) << f->message;
  EXPECT_EQ(
      std::count_if(all.begin(), all.end(), [](const Finding& x) { return x.code == FindingCode::UnorganizedGpuUse; }),
      1)
      << "neither the system namespace nor the tenant's";
  EXPECT_TRUE(failsClosed(FindingCode::UnorganizedGpuUse));
  EXPECT_FALSE(evaluateGate(c, c.classes.at("h200"), all).open);

  c.tenancy.unorganized = UnorganizedGpuPolicy::Allow;
  EXPECT_EQ(find(audit(), FindingCode::UnorganizedGpuUse), nullptr);
}

TEST_F(Unorganized, AnHrqNamingNoQuotaForThePoolIsUnattributedOnceTheTenantUsesIt) {
  c.hrqs.at("acme/plan-quota").hard = ResourceList{};
  c.hrqs.at("acme/plan-quota").hard.set(quotaKey("nvidia.com/other"), 1);
  c.hrqs.at("acme/plan-quota").statusHard = c.hrqs.at("acme/plan-quota").hard;
  auto unattributed = [&] {
    auto all = audit();
    auto it = std::find_if(all.begin(), all.end(), [&](const Finding& f) {
      return f.code == FindingCode::UnattributedQuantity && f.subject == "hrq/acme/plan-quota/" + key;
    });
    return it == all.end() ? std::optional<Finding>{} : std::optional<Finding>{*it};
  };
  EXPECT_FALSE(unattributed()) << "no use yet: nothing to attribute";
  put(c, gpuPod("acme-dev", "train", kH200, 3, "gpu-1"));
  auto f = unattributed();
  ASSERT_TRUE(f);
  EXPECT_NE(f->message.find("sets no hard quota for " + key), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("use 3 unit(s)"), std::string::npos) << f->message;
}

}  // namespace
}  // namespace tally::model
