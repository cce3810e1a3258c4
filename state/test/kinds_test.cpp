#include "tally/state/kinds.hpp"

#include <gtest/gtest.h>

namespace tally::state {
namespace {

TEST(Kinds, DefaultOptionsWatchTheAlwaysKindsOrganizationsAndThePlans) {
  const std::set<model::Kind> kinds = watchedKinds(SourceOptions{});
  EXPECT_EQ(kinds,
            (std::set<model::Kind>{
                model::Kind::Node, model::Kind::Pod, model::Kind::Namespace, model::Kind::HierarchicalResourceQuota,
                model::Kind::ResourceQuota, model::Kind::DeviceClass, model::Kind::GpuDevice,
                model::Kind::VirtualMachineInstance, model::Kind::Organization, model::Kind::BillingPlans}));
}

TEST(Kinds, EachGateTurnsOnlyItsKind) {
  SourceOptions o;
  o.organizations = false;
  o.billingPlans.reset();
  const std::set<model::Kind> base = watchedKinds(o);
  EXPECT_FALSE(base.contains(model::Kind::Organization));
  EXPECT_FALSE(base.contains(model::Kind::BillingPlans));
  EXPECT_EQ(base.size(), 8u);
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
  EXPECT_EQ(seen, 12);
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

}  // namespace
}  // namespace tally::state
