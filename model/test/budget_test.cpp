#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/tenancy.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct TenantTree : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, ns("acme-ml-dev", {"acme-ml", "acme"}));
    put(c, ns("other"));
    put(c, org("acme"));
  }
  std::optional<Refusal> check(std::string_view nsName, std::int64_t amount) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkBudget(c, view, nsName, BudgetAsk{key, amount, 0});
  }
};

TEST_F(TenantTree, AncestorsComeNearestFirstFromHncLabels) {
  EXPECT_EQ(selfAndAncestors(c.namespaces.at("acme-ml-dev")),
            (std::vector<std::string>{"acme-ml-dev", "acme-ml", "acme"}));
}

TEST_F(TenantTree, OrganizationIsFoundThroughTheAncestors) {
  const Organization* o = organizationOf(c, "acme-ml-dev");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->name, "acme");
  EXPECT_EQ(organizationOf(c, "other"), nullptr);
}

TEST_F(TenantTree, NoQuotaMeansNoLimit) { EXPECT_FALSE(check("acme-ml-dev", 100)); }

TEST_F(TenantTree, AnAncestorsBudgetRefuses) {
  put(c, hrq("acme", "plan-quota", key, 4));
  put(c, gpuPod("acme-ml", "busy", kH200, 3, "gpu-1"));
  auto refusal = check("acme-ml-dev", 2);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, Code::BudgetExceeded);
  EXPECT_NE(refusal->message.find("acme/plan-quota"), std::string::npos) << refusal->message;
  EXPECT_NE(refusal->message.find("3 in use + 2 requested"), std::string::npos) << refusal->message;
  EXPECT_FALSE(check("acme-ml-dev", 1));
}

TEST_F(TenantTree, SiblingSubtreeUsageDoesNotCountAgainstAnotherSubtree) {
  put(c, ns("acme-web", {"acme"}));
  put(c, hrq("acme-ml", "project-hrq", key, 2));
  put(c, gpuPod("acme-web", "web", kH200, 5, "gpu-1"));
  EXPECT_FALSE(check("acme-ml-dev", 2));
}

TEST_F(TenantTree, ResourceQuotaCapsTheNamespaceItself) {
  ResourceQuota rq;
  rq.ns = "acme-ml";
  rq.name = "project-quota";
  rq.hard.set(key, 1);
  put(c, rq);
  auto refusal = check("acme-ml", 2);
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->message.find("resourcequota acme-ml/project-quota"), std::string::npos);
}

TEST_F(TenantTree, ZeroHardIsALimitNotAbsence) {
  put(c, hrq("acme", "plan-quota", key, 0));
  EXPECT_TRUE(check("acme", 1));
}

TEST_F(TenantTree, UnsyncedQuotaCacheRefusesClosed) {
  c.caches[Kind::HierarchicalResourceQuota].synced = false;
  auto refusal = check("acme-ml", 1);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, Code::BudgetUnknown);
  EXPECT_NE(refusal->message.find("HierarchicalResourceQuota"), std::string::npos);
}

TEST_F(TenantTree, EntitlementIsInheritedFromAnAncestorLabel) {
  c.namespaces.at("acme").entitledClasses.push_back("a100-10c");
  EXPECT_TRUE(entitled(c, "acme-ml-dev", "a100-10c"));
  EXPECT_FALSE(entitled(c, "other", "a100-10c"));
}

}  // namespace
}  // namespace tally::model
