// Dynamic Resource Allocation pools: inventory from ResourceSlices, usage from
// ResourceClaims, and the incremental index agreeing with both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/claim_admission.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/index.hpp"
#include "tally/model/pod_admission.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/quota.hpp"
#include "tally/model/testing/fixtures.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"
#include "tally/model/usage_records.hpp"

namespace tally::model {
namespace {
using namespace testing;

constexpr std::string_view kDeviceClass = "h200.example.com";

Cluster draCluster() {
  Cluster c = syncedCluster();
  put(c, draClass());
  put(c, draNode("dra-1"));
  put(c, ns("acme", {"acme-org"}));
  put(c, ns("acme-org"));
  return c;
}

const Node& node(const Cluster& c, const std::string& name) { return c.nodes.at(name); }

// A shared DRA class: a quarter of an H200's memory is one share.
DeviceClass quarterClass() {
  DeviceClass shared = draClass("h200-quarter", "h200-shared.example.com");
  shared.allocation = Allocation::Shared;
  shared.memoryMiB = 141 * 1024;
  shared.share = SharePolicy{141 * 1024 / 4, 25, 4};
  shared.dra->shareCapacity = "memory";
  return shared;
}

TEST(DraInventory, ACompletePoolServesOneUnitPerDevice) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 2));
  const DeviceClass& cls = c.classes.at("h200-dra");
  EXPECT_TRUE(inPool(node(c, "dra-1"), cls));
  NodeUnits u = unitsServed(node(c, "dra-1"), cls);
  EXPECT_EQ(u.units, 2);
  EXPECT_EQ(u.devices, 2);
  EXPECT_FALSE(u.notServed);
  // A class of another driver sees nothing there.
  DeviceClass other = draClass("other", "other.example.com");
  other.dra->driver = "other.example.com";
  EXPECT_FALSE(inPool(node(c, "dra-1"), other));
}

TEST(DraInventory, APoolWithASliceMissingIsUnknownUntilItArrives) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-a", "dra-1", "dra-1", 2, 0, 1, 2));
  const DeviceClass& cls = c.classes.at("h200-dra");
  NodeUnits u = unitsServed(node(c, "dra-1"), cls);
  EXPECT_EQ(u.units, 0);
  ASSERT_TRUE(u.notServed);
  EXPECT_EQ(u.notServed->code, Code::DraPoolIncomplete);
  EXPECT_NE(u.notServed->message.find("1 of 2 slice(s) seen"), std::string::npos) << u.notServed->message;
  EXPECT_TRUE(inPool(node(c, "dra-1"), cls)) << "an unknown pool is still the class's pool";
  put(c, draSlice("dra-1-b", "dra-1", "dra-1", 2, 2, 1, 2));
  u = unitsServed(node(c, "dra-1"), cls);
  EXPECT_EQ(u.units, 4);
  EXPECT_FALSE(u.notServed);
}

TEST(DraInventory, SlicesOfAnOlderGenerationAreOnTheirWayOut) {
  Cluster c = draCluster();
  put(c, draSlice("old", "dra-1", "dra-1", 4, 0, 1, 1));
  put(c, draSlice("new", "dra-1", "dra-1", 2, 0, 2, 1));
  EXPECT_EQ(unitsServed(node(c, "dra-1"), c.classes.at("h200-dra")).units, 2);
  // A newer generation of two slices with one published: unknown, not the old figure.
  put(c, draSlice("newer", "dra-1", "dra-1", 2, 0, 3, 2));
  EXPECT_EQ(unitsServed(node(c, "dra-1"), c.classes.at("h200-dra")).notServed->code, Code::DraPoolIncomplete);
}

TEST(DraInventory, TaintedDevicesAreUnhealthyAndEffectNoneIsIgnored) {
  Cluster c = draCluster();
  ResourceSlice s = draSlice("dra-1-gpus", "dra-1", "dra-1", 3);
  s.devices[0].taints.push_back(DraTaint{"gpu.example.com/xid", "79", DraTaintEffect::NoSchedule});
  s.devices[1].taints.push_back(DraTaint{"note", "", DraTaintEffect::None});
  put(c, s);
  const DeviceClass& cls = c.classes.at("h200-dra");
  EXPECT_EQ(unitsServed(node(c, "dra-1"), cls).units, 2);
  DraNodeUnits d = draUnitsOn(node(c, "dra-1"), cls);
  EXPECT_EQ(d.unhealthyDevices, 1);
  ASSERT_EQ(d.unhealthy.size(), 1u);
  EXPECT_EQ(d.unhealthy[0], "dra-1/gpu-0: taint gpu.example.com/xid=79:NoSchedule");
  // A DeviceTaintRule taints the devices its selector names.
  put(c, DeviceTaintRule{"drain-gpu-2", std::string(kDraDriver), "dra-1", "gpu-2",
                         DraTaint{"maintenance", "", DraTaintEffect::NoExecute}});
  EXPECT_EQ(unitsServed(node(c, "dra-1"), cls).units, 1);
  // Every device tainted: the node serves nothing, and says which taints.
  put(c, DeviceTaintRule{"drain-pool", std::string(kDraDriver), "dra-1", "",
                         DraTaint{"maintenance", "", DraTaintEffect::NoSchedule}});
  NodeUnits u = unitsServed(node(c, "dra-1"), cls);
  EXPECT_EQ(u.units, 0);
  ASSERT_TRUE(u.notServed);
  EXPECT_NE(u.notServed->message.find("dra-1/gpu-1: taint maintenance=:NoSchedule"), std::string::npos)
      << u.notServed->message;
}

TEST(DraInventory, AttributesSelectMembersWithOrWithoutTheirDomain) {
  Cluster c = draCluster();
  ResourceSlice s = draSlice("dra-1-gpus", "dra-1", "dra-1", 3);
  s.devices[2].attributes["gpu.example.com/productName"] = "L40S";
  put(c, s);
  DeviceClass cls = draClass();
  cls.dra->attributes["productName"] = "H200";
  EXPECT_EQ(unitsServed(node(c, "dra-1"), cls).units, 2);
  cls.dra->attributes = {{"gpu.example.com/productName", "L40S"}};
  EXPECT_EQ(unitsServed(node(c, "dra-1"), cls).units, 1);
  cls.dra->attributes = {{"productName", "B200"}};
  EXPECT_FALSE(inPool(node(c, "dra-1"), cls));
}

TEST(DraInventory, ANotReadyNodeServesNothingAndAModeIsCheckedOnlyWhenNamed) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 2));
  DeviceClass cls = c.classes.at("h200-dra");
  Node n = node(c, "dra-1");
  n.activeMode = n.expectedMode = NodeMode::PodHami;
  EXPECT_EQ(unitsServed(n, cls).units, 2) << "a class naming no mode serves wherever its driver publishes";
  cls.nodeMode = NodeMode::PodHamiDra;
  EXPECT_FALSE(inPool(n, cls));
  EXPECT_EQ(unitsServed(n, cls).notServed->code, Code::NodeWrongMode);
  n = node(c, "dra-1");
  n.ready = false;
  EXPECT_EQ(unitsServed(n, c.classes.at("h200-dra")).notServed->code, Code::NodeNotReady);
}

TEST(DraInventory, ConsumableCapacityCountsInShares) {
  Cluster c = draCluster();
  const DeviceClass shared = quarterClass();
  put(c, shared);
  ResourceSlice s = draSlice("dra-1-gpus", "dra-1", "dra-1", 2);
  s.devices[0].allowMultipleAllocations = true;
  put(c, s);
  // The shareable device yields its memory over the share's; the other one is
  // allocated whole, which is a whole device's shares too.
  EXPECT_EQ(draDeviceUnits(shared, c.nodes.at("dra-1").dra[0].devices[0]), 4);
  EXPECT_EQ(unitsServed(node(c, "dra-1"), c.classes.at("h200-quarter")).units, 8);
  // A claim consuming a quarter of the memory takes one share, rounded up.
  ResourceClaim q = allocated(draClaim("acme", "q1", "h200-shared.example.com"), "dra-1", "dra-1", {"gpu-0"});
  q.results[0].consumedCapacity["memory"] = (141LL << 30) / 4 + 1;
  ClaimUsage u = claimUsage(c, q);
  EXPECT_EQ(u.capacity.get(shared.resourceName), 2);
  q.results[0].consumedCapacity["memory"] = (141LL << 30) / 4;
  EXPECT_EQ(claimUsage(c, q).capacity.get(shared.resourceName), 1);
}

TEST(DraInventory, PartitionsCountAsManyAsTheSharedCountersAllow) {
  Cluster c = draCluster();
  ResourceSlice s = draSlice("dra-1-parts", "dra-1", "dra-1", 0);
  s.sharedCounters.push_back(DraCounterSet{"gpu-0-counters", {{"memory", 80}, {"slices", 7}}});
  for (int i = 0; i < 3; ++i) {
    DraDevice part;
    part.name = "gpu-0-mig-" + std::to_string(i);
    part.attributes["productName"] = "H200";
    part.consumesCounters.push_back(DraCounterUse{"gpu-0-counters", {{"memory", 40}, {"slices", 3}}});
    s.devices.push_back(part);
  }
  DraDevice stray;
  stray.name = "gpu-0-unknown-counter";
  stray.consumesCounters.push_back(DraCounterUse{"no-such-set", {{"memory", 1}}});
  s.devices.push_back(stray);
  put(c, s);
  EXPECT_EQ(unitsServed(node(c, "dra-1"), c.classes.at("h200-dra")).units, 2);
}

TEST(DraUsage, AnAllocatedClaimTakesItsDevicesOnItsNodeAndItsNamespacesBudget) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  const DeviceClass& cls = c.classes.at("h200-dra");
  put(c, allocated(draClaim("acme", "train", std::string(kDeviceClass), 2), "dra-1", "dra-1", {"gpu-0", "gpu-1"}));
  ClaimUsage u = claimUsage(c, c.resourceClaims.at("acme/train"));
  EXPECT_TRUE(u.allocated);
  EXPECT_EQ(u.node, "dra-1");
  EXPECT_EQ(u.capacity.get(cls.resourceName), 2);
  EXPECT_EQ(u.budget.get("requests.deviceclass.resource.kubernetes.io/h200.example.com"), 2);
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_EQ(freeUnits(node(c, "dra-1"), cls, view), 2);
  EXPECT_EQ(view.subtreeUsed("acme-org", quotaKey(cls.resourceName)), 2) << "charged up the tenant tree";
}

TEST(DraUsage, AClaimNotAllocatedYetChargesWhatItRequestsToTheBudgetOnly) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  put(c, draClaim("acme", "waiting", std::string(kDeviceClass), 3));
  ClaimUsage u = claimUsage(c, c.resourceClaims.at("acme/waiting"));
  EXPECT_FALSE(u.allocated);
  EXPECT_TRUE(u.node.empty());
  EXPECT_TRUE(u.capacity.empty());
  EXPECT_EQ(u.budget.get(quotaKey(c.classes.at("h200-dra").resourceName)), 3);
  // firstAvailable: the largest alternative; All: the most one node has.
  ResourceClaim alternatives = draClaim("acme", "alt", std::string(kDeviceClass), 1);
  DraRequestChoice two = alternatives.requests[0].choices[0];
  two.name = "two";
  two.count = 2;
  alternatives.requests[0].choices[0].name = "one";
  alternatives.requests[0].choices.push_back(two);
  EXPECT_EQ(claimUsage(c, alternatives).budget.get(quotaKey(c.classes.at("h200-dra").resourceName)), 2);
  ResourceClaim all = draClaim("acme", "all", std::string(kDeviceClass));
  all.requests[0].choices[0].mode = DraAllocationMode::All;
  EXPECT_EQ(claimUsage(c, all).budget.get(quotaKey(c.classes.at("h200-dra").resourceName)), 4);
  // Deleted before allocation: nothing.
  ResourceClaim gone = draClaim("acme", "gone", std::string(kDeviceClass), 3);
  gone.deleting = true;
  EXPECT_TRUE(claimUsage(c, gone).budget.empty());
}

TEST(DraUsage, AdminAccessExtendedResourceAndOtherDriversTakeNothing) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  ResourceClaim admin = allocated(draClaim("acme", "monitor", std::string(kDeviceClass)), "dra-1", "dra-1", {"gpu-0"});
  admin.results[0].adminAccess = true;
  EXPECT_TRUE(claimUsage(c, admin).budget.empty());
  ResourceClaim adminRequest = draClaim("acme", "monitor-2", std::string(kDeviceClass));
  adminRequest.requests[0].choices[0].adminAccess = true;
  EXPECT_TRUE(claimUsage(c, adminRequest).budget.empty());
  // The scheduler's claim for a pod's extended-resource request: the pod counts it.
  ResourceClaim extended =
      allocated(draClaim("acme", "pod-extended-resources-x", std::string(kDeviceClass)), "dra-1", "dra-1", {"gpu-1"});
  extended.extendedResource = true;
  ClaimUsage u = claimUsage(c, extended);
  EXPECT_TRUE(u.budget.empty());
  EXPECT_TRUE(u.capacity.empty());
  // A NIC of another driver is no GPU Tally sells.
  ResourceClaim nic = draClaim("acme", "nic", "nic.example.com");
  EXPECT_TRUE(claimUsage(c, nic).budget.empty());
}

TEST(DraUsage, AResultNamingADeviceNoKnownSliceListsIsChargedWholeAndListed) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-a", "dra-1", "dra-1", 2, 0, 1, 2));  // incomplete: unknown
  ResourceClaim claim = allocated(draClaim("acme", "train", std::string(kDeviceClass)), "dra-1", "dra-1", {"gpu-0"});
  ClaimUsage u = claimUsage(c, claim);
  ASSERT_EQ(u.unresolved.size(), 1u);
  EXPECT_EQ(u.unresolved[0], "gpu.example.com/dra-1/gpu-0");
  EXPECT_EQ(u.capacity.get(c.classes.at("h200-dra").resourceName), 1);
  EXPECT_EQ(u.budget.get(quotaKey(c.classes.at("h200-dra").resourceName)), 1);
}

// Applies the same events to an index and to a cluster; the index's totals,
// folded nodes and free units must equal the ones recomputed from scratch.
class DraIndexTest : public ::testing::Test {
 protected:
  void expectAgrees(const std::string& step) {
    Cluster scratch = c;
    foldDraInventory(scratch);
    UsageTotals totals = computeUsage(scratch);
    EXPECT_EQ(index.totals(), totals) << step;
    for (const auto& [name, n] : scratch.nodes) EXPECT_EQ(index.cluster().nodes.at(name).dra, n.dra) << step;
    TotalsCapacityView view(scratch, totals);
    for (const auto& [name, cls] : scratch.classes) {
      EXPECT_EQ(index.poolFreeUnits(index.cluster(), cls), view.poolFreeUnits(scratch, cls)) << step;
      EXPECT_EQ(index.pendingClaimUnits(index.cluster(), cls), view.pendingClaimUnits(scratch, cls)) << step;
      EXPECT_EQ(index.snapshot().pendingClaimUnits(index.cluster(), cls), view.pendingClaimUnits(scratch, cls)) << step;
    }
  }
  void slice(const ResourceSlice& s) {
    c.resourceSlices[s.name] = s;
    index.upsertResourceSlice(s);
  }
  void claim(const ResourceClaim& r) {
    c.resourceClaims[objectKey(r.ns, r.name)] = r;
    index.upsertResourceClaim(r);
  }
  Cluster c = draCluster();
  UsageIndex index = UsageIndex::fromCluster(c);
};

TEST_F(DraIndexTest, SlicesAndClaimsInAnyOrderAgreeWithTotalsFromScratch) {
  const std::string resource = c.classes.at("h200-dra").resourceName;
  claim(allocated(draClaim("acme", "early", std::string(kDeviceClass)), "dra-1", "dra-1", {"gpu-0"}));
  expectAgrees("a claim allocated on a device no slice lists yet");
  EXPECT_EQ(index.nodeUsed("dra-1", resource), 1);
  slice(draSlice("dra-1-a", "dra-1", "dra-1", 2, 0, 1, 2));
  expectAgrees("one slice of two");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), c.classes.at("h200-dra")), 0) << "unknown pool: nothing free";
  slice(draSlice("dra-1-b", "dra-1", "dra-1", 2, 2, 1, 2));
  expectAgrees("the pool complete");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), c.classes.at("h200-dra")), 3);
  claim(draClaim("acme", "pending", std::string(kDeviceClass), 2));
  expectAgrees("a claim waiting for allocation");
  EXPECT_EQ(index.pendingClaimUnits(index.cluster(), c.classes.at("h200-dra")), 2);
  EXPECT_EQ(index.subtreeUsed("acme-org", quotaKey(resource)), 3);
  claim(allocated(draClaim("acme", "pending", std::string(kDeviceClass), 2), "dra-1", "dra-1", {"gpu-2", "gpu-3"}));
  expectAgrees("the claim allocated");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), c.classes.at("h200-dra")), 1);
  DeviceTaintRule rule{"drain", std::string(kDraDriver), "dra-1", "gpu-1",
                       DraTaint{"x", "", DraTaintEffect::NoSchedule}};
  c.deviceTaintRules[rule.name] = rule;
  index.upsertDeviceTaintRule(rule);
  expectAgrees("a device tainted");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), c.classes.at("h200-dra")), 0);
  // The node's own update (a heartbeat) keeps what the slices say.
  Node beat = draNode("dra-1");
  c.nodes["dra-1"] = beat;
  index.upsertNode(beat);
  expectAgrees("the node updated");
  c.resourceSlices.erase("dra-1-b");
  index.removeResourceSlice("dra-1-b");
  expectAgrees("a slice removed: the pool unknown again");
  c.resourceClaims.erase("acme/early");
  index.removeResourceClaim("acme", "early");
  c.deviceTaintRules.clear();
  index.removeDeviceTaintRule("drain");
  expectAgrees("claim and rule removed");
  UsageIndex rebuilt = UsageIndex::fromCluster(c);
  EXPECT_EQ(rebuilt.totals(), index.totals());
}

Decision door(const Cluster& c, const ResourceClaim& claim) {
  TotalsCapacityView view(c, computeUsage(c));
  return checkClaimAtCreate(c, view, claim, "resourceclaim/" + claim.ns + "/" + claim.name);
}

TEST(ClaimDoor, AClaimWithinBudgetAndPoolIsAdmitted) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  const std::string key = quotaKey(c.classes.at("h200-dra").resourceName);
  put(c, hrq("acme-org", "plan-quota", key, 4));
  EXPECT_TRUE(door(c, draClaim("acme", "train", std::string(kDeviceClass), 2)).allowed());
}

TEST(ClaimDoor, AClaimOverAnAncestorsBudgetIsRefusedNamingIt) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  const std::string key = quotaKey(c.classes.at("h200-dra").resourceName);
  put(c, hrq("acme-org", "plan-quota", key, 2));
  put(c, allocated(draClaim("acme", "running", std::string(kDeviceClass)), "dra-1", "dra-1", {"gpu-0"}));
  Decision d = door(c, draClaim("acme", "train", std::string(kDeviceClass), 2));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::BudgetExceeded);
  EXPECT_NE(d.summary().find("plan-quota"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find(key), std::string::npos) << d.summary();
}

TEST(ClaimDoor, AClosedGateRefusesNewClaims) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  c.classes.at("h200-dra").gateOpen = false;
  c.classes.at("h200-dra").gateReason = "invariant broken";
  Decision d = door(c, draClaim("acme", "train", std::string(kDeviceClass)));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::GateClosed);
}

TEST(ClaimDoor, AnUnknownPoolCannotProveRoomAndAFullOneIsInsufficient) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-a", "dra-1", "dra-1", 2, 0, 1, 2));
  Decision d = door(c, draClaim("acme", "train", std::string(kDeviceClass)));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::DraPoolIncomplete);
  EXPECT_NE(d.summary().find("1 of 2 slice(s) seen"), std::string::npos) << d.summary();
  put(c, draSlice("dra-1-b", "dra-1", "dra-1", 2, 2, 1, 2));
  EXPECT_TRUE(door(c, draClaim("acme", "train", std::string(kDeviceClass), 4)).allowed());
  d = door(c, draClaim("acme", "train", std::string(kDeviceClass), 5));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::PoolInsufficient);
  EXPECT_NE(d.summary().find("pool h200-dra has 4 free devices; resourceclaim/acme/train asks for 5"),
            std::string::npos)
      << d.summary();
}

TEST(ClaimDoor, AClaimNeedsOneNodeWithRoomForAllOfIt) {
  Cluster c = draCluster();
  put(c, draNode("dra-2"));
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 2));
  put(c, draSlice("dra-2-gpus", "dra-2", "dra-2", 2));
  Decision d = door(c, draClaim("acme", "train", std::string(kDeviceClass), 3));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::NoSingleNode);
}

TEST(ClaimDoor, FourQuarterClaimsShareADeviceAndTheFifthIsRefused) {
  Cluster c = draCluster();
  const DeviceClass shared = quarterClass();
  put(c, shared);
  ResourceSlice s = draSlice("dra-1-gpus", "dra-1", "dra-1", 1);
  s.devices[0].allowMultipleAllocations = true;
  put(c, s);
  auto quarter = [](std::string name) {
    ResourceClaim q = draClaim("acme", std::move(name), "h200-shared.example.com");
    q.requests[0].choices[0].capacity["memory"] = (141LL << 30) / 4;
    return q;
  };
  for (int i = 0; i < 4; ++i) {
    ResourceClaim q = quarter("q" + std::to_string(i));
    ASSERT_TRUE(door(c, q).allowed()) << i << ": " << door(c, q).summary();
    ResourceClaim placed = allocated(q, "dra-1", "dra-1", {"gpu-0"});
    placed.results[0].consumedCapacity["memory"] = (141LL << 30) / 4;
    put(c, placed);
  }
  Decision d = door(c, quarter("q4"));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::PoolInsufficient);
}

TEST(ClaimDoor, ClaimsOfDevicesTallyDoesNotSellAndTheSchedulersOwnPass) {
  Cluster c = draCluster();
  EXPECT_TRUE(door(c, draClaim("acme", "nic", "nic.example.com")).allowed());
  ResourceClaim extended = draClaim("acme", "p-extended-resources-x", std::string(kDeviceClass), 8);
  extended.extendedResource = true;
  EXPECT_TRUE(door(c, extended).allowed());
  c.caches.erase(Kind::ResourceSlice);
  Decision d = door(c, draClaim("acme", "train", std::string(kDeviceClass)));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::CacheNotSynced);
}

TEST(ClaimDoor, ClaimsAdmittedInFlightSpendTheBudgetAndThePool) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  const std::string key = quotaKey(c.classes.at("h200-dra").resourceName);
  put(c, hrq("acme-org", "plan-quota", key, 3));
  TotalsCapacityView view(c, computeUsage(c));
  const ResourceClaim first = draClaim("acme", "a", std::string(kDeviceClass), 2);
  ASSERT_TRUE(checkClaimAtCreate(c, view, first, "resourceclaim/acme/a").allowed());
  Decision second =
      checkClaimAtCreate(c, view, draClaim("acme", "b", std::string(kDeviceClass), 2), "resourceclaim/acme/b", {first});
  ASSERT_FALSE(second.allowed());
  EXPECT_EQ(second.refusals[0].code, Code::BudgetExceeded) << second.summary();
  // Without a budget, the pool: 4 devices, 2 in flight, 3 more asked.
  c.hrqs.clear();
  TotalsCapacityView open(c, computeUsage(c));
  Decision pool =
      checkClaimAtCreate(c, open, draClaim("acme", "b", std::string(kDeviceClass), 3), "resourceclaim/acme/b", {first});
  ASSERT_FALSE(pool.allowed());
  EXPECT_EQ(pool.refusals[0].code, Code::PoolInsufficient) << pool.summary();
}

TEST(ClaimDoor, AGpuDeviceCannotHoldDevicesOfADraPool) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  TotalsCapacityView view(c, computeUsage(c));
  Decision d = checkDeviceOrder(c, view, DeviceOrder{"acme", "gpudevice/acme/held", {{"h200-dra", 1}}});
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::NotPermitted);
  EXPECT_NE(d.summary().find("ResourceClaim of DeviceClass h200.example.com"), std::string::npos) << d.summary();
}

// The pool's invariant and audit on DRA devices: a tainted device leaves the
// healthy term, an incomplete pool makes the equation unknown, and the quota
// reconciler's grant carries ResourceQuota's device key beside the pool's own.
struct DraPool : ::testing::Test {
  Cluster c = draCluster();
  const std::string key = quotaKey(draClass().resourceName);
  void SetUp() override {
    Addon addon;
    addon.id = "h200-dra";
    addon.gpu["h200-dra"] = GpuGrant{1, 0, 0, 0};
    c.plans->addons[addon.id] = addon;
    put(c, org("acme-org", {{"h200-dra", 3}}));
    put(c, hrq("acme-org", "plan-quota", key, 3));
  }
};

TEST_F(DraPool, ATaintedDeviceLeavesTheHealthyTermAndTheInvariantFails) {
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  PoolInvariant inv = evaluateInvariant(c, c.classes.at("h200-dra"));
  EXPECT_EQ(inv.healthy.units, 4);
  EXPECT_TRUE(inv.holds()) << inv.equation();  // 4 >= 3 + 1 spare
  put(c, DeviceTaintRule{"xid", std::string(kDraDriver), "dra-1", "gpu-3",
                         DraTaint{"gpu.example.com/xid", "79", DraTaintEffect::NoSchedule}});
  inv = evaluateInvariant(c, c.classes.at("h200-dra"));
  EXPECT_EQ(inv.healthy.units, 3);
  EXPECT_FALSE(inv.holds()) << inv.equation();
  auto findings = auditPool(c, c.classes.at("h200-dra"), AuditOptions{});
  auto has = [&](FindingCode code) {
    return std::any_of(findings.begin(), findings.end(), [&](const Finding& f) { return f.code == code; });
  };
  EXPECT_TRUE(has(FindingCode::HardQuotaAboveCapacity));
  EXPECT_TRUE(has(FindingCode::DegradedHealth));
  EXPECT_FALSE(has(FindingCode::ProfileModeMismatch)) << "a DRA pool names no node mode and serves pods whole";
}

TEST_F(DraPool, AnIncompletePoolMakesTheInvariantUnknownAndIsAFinding) {
  put(c, draSlice("dra-1-a", "dra-1", "dra-1", 4, 0, 1, 2));
  PoolInvariant inv = evaluateInvariant(c, c.classes.at("h200-dra"));
  ASSERT_FALSE(inv.unknown.empty());
  EXPECT_NE(inv.unknown[0].find("1 of 2 slice(s) seen"), std::string::npos) << inv.unknown[0];
  auto findings = auditPool(c, c.classes.at("h200-dra"), AuditOptions{});
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(),
                          [](const Finding& f) { return f.code == FindingCode::DraPoolIncomplete; }));
  EXPECT_TRUE(failsClosed(FindingCode::DraPoolIncomplete));
}

TEST_F(DraPool, ADevicePluginBesideTheDriverIsAFinding) {
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  c.nodes.at("dra-1").allocatable.set(c.classes.at("h200-dra").resourceName, 4);
  auto findings = auditPool(c, c.classes.at("h200-dra"), AuditOptions{});
  EXPECT_TRUE(std::any_of(findings.begin(), findings.end(),
                          [](const Finding& f) { return f.code == FindingCode::DevicePluginAndDra; }));
}

TEST_F(DraPool, TheGrantCarriesResourceQuotasDeviceKeyToo) {
  const ResourceList granted = grantedQuota(c, c.organizations.begin()->second);
  EXPECT_EQ(granted.get(key), 3);
  EXPECT_EQ(granted.get("h200.example.com.deviceclass.resource.k8s.io/devices"), 3);
  const auto owned = ownedPlanQuotaKeys(c);
  EXPECT_NE(std::find(owned.begin(), owned.end(), "h200.example.com.deviceclass.resource.k8s.io/devices"), owned.end());
  EXPECT_EQ(std::find(owned.begin(), owned.end(), quotaKey("nvidia.com/gpumem")), owned.end());
}

TEST(DraRecords, AnAllocatedClaimIsAHolderOfItsDevicesUnits) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  put(c, allocated(draClaim("acme", "train", std::string(kDeviceClass), 2), "dra-1", "dra-1", {"gpu-0", "gpu-1"}));
  put(c, draClaim("acme", "waiting", std::string(kDeviceClass), 1));
  const auto holders = holdersAt(c);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].kind, HolderKind::ResourceClaim);
  EXPECT_EQ(holders[0].name, "train");
  EXPECT_EQ(holders[0].className, "h200-dra");
  EXPECT_EQ(holders[0].units, 2);
  EXPECT_EQ(parseHolderKind(toString(HolderKind::ResourceClaim)), HolderKind::ResourceClaim);
}

TEST(ClaimDoor, ClaimsWaitingForTheAllocatorAreDemandOnThePool) {
  Cluster c = draCluster();
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  put(c, draClaim("acme", "waiting", std::string(kDeviceClass), 3));
  Decision d = door(c, draClaim("acme", "next", std::string(kDeviceClass), 2));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals[0].code, Code::PoolInsufficient) << d.summary();
  EXPECT_NE(d.summary().find("has 1 free devices"), std::string::npos) << d.summary();
  EXPECT_TRUE(door(c, draClaim("acme", "next", std::string(kDeviceClass), 1)).allowed());
}

TEST(DraResources, TheDeviceClassExtendedResourceIsOneAndItsQuotaKeyIsAGpuKey) {
  EXPECT_TRUE(isExtendedResourceName("deviceclass.resource.kubernetes.io/h200.example.com"));
  EXPECT_FALSE(isExtendedResourceName("resource.kubernetes.io/h200"));
  EXPECT_TRUE(isGpuQuotaKey("requests.deviceclass.resource.kubernetes.io/h200.example.com"));
  EXPECT_TRUE(isGpuQuotaKey("h200.example.com.deviceclass.resource.k8s.io/devices"));
}

TEST(ClaimDoor, HugeRequestsSaturateAndAreRefused) {
  Cluster c = draCluster();
  put(c, quarterClass());
  put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  ResourceClaim huge = draClaim("acme", "huge", std::string(kDeviceClass), INT64_MAX);
  DraRequest second = huge.requests[0];
  second.name = "more";
  huge.requests.push_back(second);
  ClaimUsage u = claimUsage(c, huge);
  EXPECT_EQ(u.budget.get(quotaKey(c.classes.at("h200-dra").resourceName)), INT64_MAX);
  ResourceClaim shares = draClaim("acme", "shares", "h200-shared.example.com", INT64_MAX);
  shares.requests[0].choices[0].capacity["memory"] = INT64_MAX;
  EXPECT_EQ(claimUsage(c, shares).budget.get(quotaKey(c.classes.at("h200-quarter").resourceName)), INT64_MAX);
  EXPECT_FALSE(door(c, huge).allowed());
  EXPECT_FALSE(door(c, shares).allowed());
}

// --- Pods that name claims: the extender and the pod doors decide them -----

// A pod naming the claim `claim` directly, or (templateName set) through a
// template whose claim the pod's status names once it is made.
Pod claimPod(const std::string& nsName, const std::string& name, const std::string& claim,
             const std::string& templateName = "") {
  Pod p;
  p.ns = nsName;
  p.name = name;
  p.uid = "uid-" + name;
  p.hasResourceClaims = true;
  p.containers.push_back(ResourceList{});
  p.claims.push_back(PodClaim{"gpu", claim, templateName});
  return p;
}

bool hasCode(const Decision& d, Code code) {
  return std::any_of(d.refusals.begin(), d.refusals.end(), [&](const Refusal& r) { return r.code == code; });
}

struct ClaimPods : ::testing::Test {
  Cluster c = draCluster();
  const std::string resource = draClass().resourceName;
  void SetUp() override {
    put(c, draNode("dra-2"));
    put(c, draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
    put(c, draSlice("dra-2-gpus", "dra-2", "dra-2", 2));
    // Three of dra-1's four devices are taken by an allocated claim.
    put(c, allocated(draClaim("acme", "running", std::string(kDeviceClass), 3), "dra-1", "dra-1",
                     {"gpu-0", "gpu-1", "gpu-2"}));
    put(c, draClaim("acme", "waiting", std::string(kDeviceClass), 2));
  }
};

TEST_F(ClaimPods, WhatAPodsClaimsStillAskIsCountedByTheClassResource) {
  TotalsCapacityView view(c, computeUsage(c));
  PodClaimUnits waiting = podClaimUnits(c, view, claimPod("acme", "p", "waiting"));
  EXPECT_EQ(waiting.byResource.get(resource), 2);
  EXPECT_EQ(waiting.byClass.get("h200-dra"), 2);
  EXPECT_TRUE(waiting.unseen.empty());
  // An allocated claim asks nothing more: its node counts it already.
  EXPECT_TRUE(podClaimUnits(c, view, claimPod("acme", "r", "running")).byResource.empty());
  // A template's claim not made yet, and a claim the cache does not hold.
  PodClaimUnits unmade = podClaimUnits(c, view, claimPod("acme", "t", "", "two-h200"));
  ASSERT_EQ(unmade.unseen.size(), 1u);
  EXPECT_NE(unmade.unseen[0].find("from template two-h200 is not made yet"), std::string::npos) << unmade.unseen[0];
  PodClaimUnits unseen = podClaimUnits(c, view, claimPod("acme", "u", "elsewhere"));
  ASSERT_EQ(unseen.unseen.size(), 1u);
  EXPECT_NE(unseen.unseen[0].find("resourceclaim/acme/elsewhere"), std::string::npos) << unseen.unseen[0];
}

TEST_F(ClaimPods, TheFilterSendsAClaimPodWhereTallyCountsItsUnitsFree) {
  TotalsCapacityView view(c, computeUsage(c));
  const Pod pod = claimPod("acme", "p", "waiting");
  PodDemand demand = podDemand(c, view, pod);
  EXPECT_EQ(demand.requests.get(resource), 2);
  EXPECT_EQ(demand.claimUnits.get(resource), 2);
  EXPECT_TRUE(demand.budget.empty()) << "the claim was charged at its creation, not again by its pod";
  NodeVerdict full = filterNode(c, view, demand, c.nodes.at("dra-1"));
  EXPECT_EQ(full.verdict, Verdict::Unschedulable);
  ASSERT_TRUE(full.reason);
  EXPECT_EQ(full.reason->code, Code::NodeInsufficient);
  EXPECT_NE(full.reason->message.find("1 of 4"), std::string::npos) << full.reason->message;
  EXPECT_EQ(filterNode(c, view, demand, c.nodes.at("dra-2")).verdict, Verdict::Fits);
}

TEST_F(ClaimPods, AGateClosedAfterTheClaimWasAdmittedStopsItsPod) {
  c.classes.at("h200-dra").gateOpen = false;
  c.classes.at("h200-dra").gateReason = "invariant broken";
  TotalsCapacityView view(c, computeUsage(c));
  const Pod pod = claimPod("acme", "p", "waiting");
  PodDemand demand = podDemand(c, view, pod);
  NodeVerdict v = filterNode(c, view, demand, c.nodes.at("dra-2"));
  EXPECT_EQ(v.verdict, Verdict::Unresolvable);
  ASSERT_TRUE(v.reason);
  EXPECT_EQ(v.reason->code, Code::GateClosed);
  EXPECT_TRUE(hasCode(checkPodGates(c, demand), Code::GateClosed));
}

TEST_F(ClaimPods, AnIdleReservationOfAnotherOrganizationKeepsAClaimPodOff) {
  // dra-1 and dra-2 have 1 + 2 free; beta reserved 2 devices of the pool and
  // runs nothing, so acme's pod of 2 would eat into beta's reservation.
  put(c, org("beta"));
  put(c, ns("beta"));
  c.ledger.records.push_back(record("dra-res-1", "beta", "h200-dra", 2, ReservationState::Active));
  TotalsCapacityView view(c, computeUsage(c));
  const Pod pod = claimPod("acme", "p", "waiting");
  PodDemand demand = podDemand(c, view, pod);
  NodeVerdict v = filterNode(c, view, demand, c.nodes.at("dra-2"));
  EXPECT_EQ(v.verdict, Verdict::Unschedulable);
  ASSERT_TRUE(v.reason);
  EXPECT_EQ(v.reason->code, Code::ReservedForOthers);
  EXPECT_NE(v.reason->message.find("pool h200-dra has 1 unit(s) left after idle reservations"), std::string::npos)
      << v.reason->message;
}

TEST_F(ClaimPods, AClaimNotSeenYetKeepsThePodFromEveryNodeButNotFromItsCreation) {
  TotalsCapacityView view(c, computeUsage(c));
  const Pod pod = claimPod("acme", "t", "", "two-h200");
  PodDemand demand = podDemand(c, view, pod);
  NodeVerdict v = filterNode(c, view, demand, c.nodes.at("dra-2"));
  EXPECT_EQ(v.verdict, Verdict::Unschedulable) << "the scheduler retries once the claim is made";
  ASSERT_TRUE(v.reason);
  EXPECT_EQ(v.reason->code, Code::ClaimNotSeen);
  // At its CREATE a template's claim cannot exist yet: the doors let it in.
  Pod routed = pod;
  routed.schedulerName = "tally-scheduler";
  routed.containers[0].set(kClaimPodMarker, 1);
  EXPECT_TRUE(checkGpuPodAtCreate(c, view, routed, PlacementPolicy{}).allowed())
      << checkGpuPodAtCreate(c, view, routed, PlacementPolicy{}).summary();
}

TEST_F(ClaimPods, ThePlacementDoorRoutesAndMarksAClaimPodAndTheValidatingDoorInsists) {
  TotalsCapacityView view(c, computeUsage(c));
  Pod pod = claimPod("acme", "p", "waiting");
  ASSERT_TRUE(claimPodDecided(c, pod));
  PodDemand demand = podDemandAtCreate(c, view, pod, launchAtCreate(c, pod));
  CreateRoute route = routeAtCreate(c, view, demand, PlacementPolicy{});
  EXPECT_TRUE(route.decision.allowed());
  EXPECT_EQ(route.scheduler, "tally-scheduler");
  EXPECT_TRUE(route.claimMarker);
  // Not routed: another scheduler is refused; routed but unmarked too (its
  // scheduler would never ask the extender).
  Decision other = checkGpuPodAtCreate(c, view, pod, PlacementPolicy{});
  ASSERT_TRUE(hasCode(other, Code::SchedulerBypass)) << other.summary();
  EXPECT_NE(other.summary().find("its ResourceClaims"), std::string::npos) << other.summary();
  pod.schedulerName = "tally-scheduler";
  Decision unmarked = checkGpuPodAtCreate(c, view, pod, PlacementPolicy{});
  ASSERT_TRUE(hasCode(unmarked, Code::SchedulerBypass)) << unmarked.summary();
  EXPECT_NE(unmarked.summary().find(std::string(kClaimPodMarker)), std::string::npos) << unmarked.summary();
  pod.containers[0].set(kClaimPodMarker, 1);
  EXPECT_TRUE(carriesClaimMarker(pod));
  EXPECT_TRUE(checkGpuPodAtCreate(c, view, pod, PlacementPolicy{}).allowed());
  demand = podDemandAtCreate(c, view, pod, launchAtCreate(c, pod));
  EXPECT_FALSE(routeAtCreate(c, view, demand, PlacementPolicy{}).claimMarker) << "marked once";
  EXPECT_EQ(demand.requests.get(std::string(kClaimPodMarker)), 0) << "the marker is no GPU";
  // A pod asking a GPU resource of its own is asked about already: no marker
  // (on an extended resource DRA serves, the scheduler would want a node
  // advertising the marker).
  Pod both = claimPod("acme", "both", "waiting");
  both.containers[0].set(resource, 1);
  EXPECT_FALSE(needsClaimMarker(c, both));
  demand = podDemandAtCreate(c, view, both, launchAtCreate(c, both));
  EXPECT_FALSE(routeAtCreate(c, view, demand, PlacementPolicy{}).claimMarker);
  // Without any DRA pool, claims are none of Tally's business.
  Cluster plain = syncedCluster();
  EXPECT_FALSE(claimPodDecided(plain, claimPod("acme", "p", "waiting")));
}

TEST_F(ClaimPods, TheIndexAndItsSnapshotsAnswerForClaimsAndHoldABoundPodsClaimUnits) {
  UsageIndex index = UsageIndex::fromCluster(c);
  UsageSnapshot snap = index.snapshot();
  TotalsCapacityView scratch(c, computeUsage(c));
  for (const char* key : {"acme/running", "acme/waiting", "acme/none"}) {
    EXPECT_EQ(index.claimAsks(index.cluster(), key), scratch.claimAsks(c, key)) << key;
    EXPECT_EQ(snap.claimAsks(Cluster{}, key), scratch.claimAsks(c, key)) << key << ": snapshots keep no claims";
  }
  // The extender's bind: the pod's claim units are held on its node until
  // the pod is seen bound, though the pod itself requests no GPU.
  const Pod pod = claimPod("acme", "p", "waiting");
  index.upsertPod(pod);
  index.assume(pod, "dra-2");
  EXPECT_EQ(index.nodeUsed("dra-2", resource), 2);
  const Pod next = claimPod("acme", "q", "waiting");
  PodDemand second = podDemand(index.cluster(), index, next);
  EXPECT_EQ(filterNode(index.cluster(), index, second, index.cluster().nodes.at("dra-2")).verdict,
            Verdict::Unschedulable);
  Pod bound = pod;
  bound.nodeName = "dra-2";
  index.upsertPod(bound);
  EXPECT_EQ(index.assumedCount(), 0u);
  // Allocated, the claim counts on its node by itself.
  ResourceClaim done =
      allocated(draClaim("acme", "waiting", std::string(kDeviceClass), 2), "dra-2", "dra-2", {"gpu-0", "gpu-1"});
  index.upsertResourceClaim(done);
  EXPECT_EQ(index.nodeUsed("dra-2", resource), 2);
  EXPECT_EQ(index.claimAsks(index.cluster(), "acme/waiting"), ResourceList{});
  index.removeResourceClaim("acme", "waiting");
  EXPECT_EQ(index.claimAsks(index.cluster(), "acme/waiting"), std::nullopt);
}

}  // namespace
}  // namespace tally::model
