#include "tally/state/kinds.hpp"

#include <gtest/gtest.h>

namespace tally::state {
namespace {

TEST(Kinds, DefaultOptionsWatchTheAlwaysKindsOrganizationsThePlansAndDra) {
  const std::set<model::Kind> kinds = watchedKinds(SourceOptions{});
  EXPECT_EQ(kinds,
            (std::set<model::Kind>{
                model::Kind::Node, model::Kind::Pod, model::Kind::Namespace, model::Kind::HierarchicalResourceQuota,
                model::Kind::ResourceQuota, model::Kind::DeviceClass, model::Kind::GpuDevice,
                model::Kind::VirtualMachineInstance, model::Kind::Organization, model::Kind::BillingPlans,
                model::Kind::ResourceSlice, model::Kind::ResourceClaim, model::Kind::DeviceTaintRule}));
}

TEST(Kinds, EachGateTurnsOnlyItsKind) {
  SourceOptions o;
  o.organizations = false;
  o.billingPlans.reset();
  const std::set<model::Kind> base = watchedKinds(o);
  EXPECT_FALSE(base.contains(model::Kind::Organization));
  EXPECT_FALSE(base.contains(model::Kind::BillingPlans));
  EXPECT_EQ(base.size(), 11u);
  o.dra = false;
  EXPECT_EQ(watchedKinds(o).size(), 8u);
  EXPECT_FALSE(watchedKinds(o).contains(model::Kind::ResourceSlice));
  EXPECT_FALSE(watchedKinds(o).contains(model::Kind::ResourceClaim));
  EXPECT_FALSE(watchedKinds(o).contains(model::Kind::DeviceTaintRule));
  o.kubevirt = true;
  EXPECT_EQ(watchedKinds(o).size(), 9u);
  EXPECT_TRUE(watchedKinds(o).contains(model::Kind::KubeVirt));
  o.ledgerDir = "/var/lib/tally/ledger";
  EXPECT_TRUE(watchedKinds(o).contains(model::Kind::Ledger));
}

TEST(Kinds, ObjectAlternativesMapToTheirKinds) {
  int seen = 0;
  forEachKind([&](auto k) {
    constexpr model::Kind kind = decltype(k)::value;
    Object object{std::in_place_type<ValueOf<kind>>};
    EXPECT_EQ(kindOf(object), kind) << model::toString(kind);
    EXPECT_EQ(kindInfo(kind).kind, kind);
    ++seen;
  });
  EXPECT_EQ(seen, 15);
  EXPECT_EQ(kindOf(Object{model::GpuDevice{}}), model::Kind::GpuDevice);
  EXPECT_EQ(kindOf(Object{std::vector<model::PermittedHostDevice>{}}), model::Kind::KubeVirt);
}

TEST(Kinds, OnlyTheBuiltInKindsWithAProtobufCodecAreAskedForProtobuf) {
  std::set<model::Kind> protobuf;
  for (const KindInfo& info : kKinds) {
    if (!info.protobuf) continue;
    protobuf.insert(info.kind);
    EXPECT_TRUE(info.group.empty()) << model::toString(info.kind) << " is not a core kind";
  }
  EXPECT_EQ(protobuf, (std::set<model::Kind>{model::Kind::Node, model::Kind::Pod, model::Kind::Namespace,
                                             model::Kind::ResourceQuota}));
  EXPECT_EQ(kindInfo(model::Kind::GpuDevice).group, "gpu.tally.dev");
  EXPECT_EQ(kindInfo(model::Kind::GpuDevice).resource, "gpudevices");
  EXPECT_TRUE(kindInfo(model::Kind::Ledger).resource.empty()) << "the ledger is read from files";
}

TEST(Kinds, EachKindIsServedWhereTheRegistrySaysAndTheLedgerNowhere) {
  EXPECT_EQ(resourceOf(model::Kind::Pod).collectionPath(), "/api/v1/pods");
  EXPECT_EQ(resourceOf(model::Kind::VirtualMachineInstance).inNamespace("t").collectionPath(),
            "/apis/kubevirt.io/v1/namespaces/t/virtualmachineinstances");
  EXPECT_TRUE(resourceOf(model::Kind::Ledger).resource.empty());
  EXPECT_EQ(resourceOf(model::Kind::ResourceSlice).collectionPath(), "/apis/resource.k8s.io/v1/resourceslices");
  EXPECT_EQ(resourceOf(model::Kind::ResourceClaim).inNamespace("t").collectionPath(),
            "/apis/resource.k8s.io/v1/namespaces/t/resourceclaims");
}

TEST(Kinds, TheListScopeLeavesTerminalPodsOutAndNamesTheOneConfigMapOfThePlansAndTheLedger) {
  SourceOptions options;
  options.billingPlans = codec::BillingPlansLocation{"kube-dc", "billing-plans"};
  options.ledgerConfigMap = codec::BillingPlansLocation{"ops", "ledger"};
  const ListScope pods = listScope(model::Kind::Pod, options);
  EXPECT_EQ(pods.fieldSelector, "status.phase!=Succeeded,status.phase!=Failed");
  EXPECT_EQ(pods.pageSize, 500);
  const ListScope plans = listScope(model::Kind::BillingPlans, options);
  EXPECT_EQ(plans.resource.collectionPath(), "/api/v1/namespaces/kube-dc/configmaps");
  EXPECT_EQ(plans.fieldSelector, "metadata.name=billing-plans");
  const ListScope ledger = listScope(model::Kind::Ledger, options);
  EXPECT_EQ(ledger.resource.collectionPath(), "/api/v1/namespaces/ops/configmaps");
  EXPECT_EQ(ledger.fieldSelector, "metadata.name=ledger");
  const ListScope nodes = listScope(model::Kind::Node, options);
  EXPECT_TRUE(nodes.fieldSelector.empty());
  EXPECT_TRUE(nodes.labelSelector.empty());
}

}  // namespace
}  // namespace tally::state
