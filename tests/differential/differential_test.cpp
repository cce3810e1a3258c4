// "Every door agrees": random clusters and random event sequences; after each
// event every door is asked the same question on the same snapshot, through
// the functions the binaries' handlers run:
//
//   catalogue    controller::optionsResponse's model::catalogOptions on the snapshot
//   GPUDevice    controller::reviewGpuDevice of an AdmissionReview (CREATE, count N)
//   VMI          controller::VmiWebhook::review of a dry-run CREATE with one template {C, N}
//   binder       model::placeHeldSet(deviceSetOf) on the snapshot holding the Pending device (HeldAheadView), as the
//   binder extender     extender::filterNodes of ExtenderArgs for a GPU pod audit/gate   model::auditPool +
//   evaluateGate, published into the class as the auditor does report       model::buildReport (tallyctl report) on the
//   cluster recomputed from scratch
//
// and the incremental index (the writer's model::UsageIndex and the published
// UsageSnapshot) is compared with computeUsage() of the same objects. Every
// disagreement is counted by relation; the goal is zero.
//
// TALLY_DIFFERENTIAL_CASES sets how many door questions are asked (default a
// few thousand, a few seconds; `make bench` asks 100,000), TALLY_DIFFERENTIAL_SEED
// the first seed.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tally/codec/catalog_json.hpp"
#include "tally/controller/catalog_endpoint.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/controller/pod_webhooks.hpp"
#include "tally/controller/vmi_webhook.hpp"
#include "tally/extender/assumptions.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/catalog.hpp"
#include "tally/model/index.hpp"
#include "tally/model/placement.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/report.hpp"
#include "tally/model/units.hpp"
#include "tally/runtime/admission/review.hpp"

namespace tally {
namespace {

constexpr model::Timestamp kNow = 1'800'000'000;
constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";
constexpr std::string_view kH100 = "nvidia.com/GH100_H100_SXM_80GB";
constexpr std::string_view kA100 = "nvidia.com/A100-10C";
constexpr std::string_view kHami = "nvidia.com/gpu";

std::int64_t envOr(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// The relations, each counted on its own.
enum Relation {
  CatalogVsWebhook,         // catalogue says N orderable <=> the GPUDevice webhook admits N
  WebhookVsBinder,          // the webhook admits N <=> the binder finds a node for N
  WebhookVsVmi,             // (VM class the KubeVirt CR permits) the webhook admits N <=> the VMI plan admits {C, N}
  CatalogSnapshotVsTotals,  // catalogue on the controller's snapshot == on the recomputed cluster (tallyctl options)
  EndpointVsCatalog,        // GET /options body == encodeCatalog(catalogOptions(...)) on the same snapshot
  ExtenderVsModel,          // extender filter per node == model::filterNode on the recomputed cluster
  GateVsDoors,              // published gate closed <=> every order of the class is refused GateClosed
  ReportVsGate,             // tallyctl report's gate == the gate the auditor published
  ReportVsSnapshotFree,     // tallyctl report's free units per node == the snapshot's freeUnits
  IndexVsRecompute,         // writer's index totals and snapshot sums == computeUsage of the same objects
  PlacementVsExtender,      // a pod preset on node N admitted by both pod doors <=> the extender passes N for it
  SchedulerBypassRefused,   // a GPU pod naming another scheduler is refused by the validating door, SchedulerBypass
  kRelations
};
constexpr const char* kRelationNames[kRelations] = {"catalogue <=> GPUDevice webhook",
                                                    "GPUDevice webhook <=> binder placement",
                                                    "GPUDevice webhook <=> VMI plan",
                                                    "catalogue snapshot == recomputed",
                                                    "GET /options == catalogue",
                                                    "extender filter == model filterNode",
                                                    "published gate <=> door refusals",
                                                    "report gate == published gate",
                                                    "report free == snapshot free",
                                                    "incremental index == computeUsage",
                                                    "pod doors on a preset node <=> extender filter",
                                                    "another scheduler refused at the pod door"};

struct Counts {
  std::int64_t checked[kRelations] = {};
  std::int64_t disagreed[kRelations] = {};
  std::int64_t cases = 0, events = 0, clusters = 0, admitted = 0, refused = 0, podFits = 0, vmiAdmitted = 0;
  std::vector<std::string> examples;
  std::map<std::string, std::int64_t> refusalCodes;  // every code of every refused order
  void check(Relation r, bool agree, const std::string& what) {
    ++checked[r];
    if (agree) return;
    ++disagreed[r];
    if (examples.size() < 20) examples.push_back(std::string(kRelationNames[r]) + ": " + what);
  }
};

// One random cluster, its mirror (every object, pods included) and the writer
// the doors' snapshots come from, fed the same events.
class World {
 public:
  explicit World(std::uint64_t seed)
      : rng_(seed),
        writer_(extender::CacheWriter::Options{.publishInterval = std::chrono::milliseconds(5),
                                               .assumeTtl = std::chrono::milliseconds(30'000),
                                               .watched = {},
                                               .clock = [] { return kNow; }}),
        vmi_(nullptr, controller::VmiWebhookOptions{}) {
    mirror_.now = kNow;
    mirror_.markAllSynced();
    mirror_.ledger.loaded = true;
    vmi_.readFrom(writer_.snapshots());
    build();
  }

  std::mt19937_64& rng() { return rng_; }
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& any(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }

  const model::Cluster& mirror() const { return mirror_; }
  extender::CacheWriter& writer() { return writer_; }
  controller::VmiWebhook& vmi() { return vmi_; }
  const std::vector<std::string>& tenants() const { return tenants_; }

  // One random change to the cluster, then the auditor's publication.
  void event() {
    switch (pick(0, 11)) {
      case 0:
      case 1: addPod(); break;
      case 2: removeSome(mirror_.pods, model::Kind::Pod); break;
      case 3:
      case 4: orderDevice(); break;
      case 5: changeDevice(); break;
      case 6: changeNode(); break;
      case 7: changeQuota(); break;
      case 8: changeAddons(); break;
      case 9: changeEntitlement(); break;
      case 10: changeClass(); break;
      case 11: addVmi(); break;
    }
    publishGates();
    writer_.flush();
  }

 private:
  template <class T>
  void put(T object) {
    if constexpr (std::is_same_v<T, model::Node>) {
      mirror_.nodes[object.name] = object;
    } else if constexpr (std::is_same_v<T, model::DeviceClass>) {
      mirror_.classes[object.name] = object;
    } else if constexpr (std::is_same_v<T, model::Namespace>) {
      mirror_.namespaces[object.name] = object;
    } else if constexpr (std::is_same_v<T, model::Pod>) {
      mirror_.pods[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::GpuDevice>) {
      mirror_.devices[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::VirtualMachineInstance>) {
      mirror_.vmis[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::HierarchicalResourceQuota>) {
      mirror_.hrqs[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::ResourceQuota>) {
      mirror_.quotas[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::Organization>) {
      mirror_.organizations[model::objectKey(object.ns, object.name)] = object;
    }
    writer_.upsert(state::Object(std::move(object)));
  }

  template <class Map>
  void removeSome(Map& map, model::Kind kind) {
    if (map.empty()) return;
    auto it = map.begin();
    std::advance(it, pick(0, static_cast<int>(map.size()) - 1));
    std::string ns, name;
    if constexpr (requires { it->second.ns; }) ns = it->second.ns;
    name = it->second.name;
    map.erase(it);
    writer_.remove(kind, ns, name);
  }

  model::DeviceClass makeClass(std::string name, model::Allocation allocation, std::string_view resource,
                               model::NodeMode mode) {
    model::DeviceClass c;
    c.name = std::move(name);
    c.allocation = allocation;
    c.workload = allocation == model::Allocation::Shared ? model::Workload::Pod : model::Workload::Vm;
    c.resourceName = std::string(resource);
    c.nodeMode = mode;
    c.memoryMiB = allocation == model::Allocation::Vgpu ? 10240 : 81920;
    c.maxCount = pick(1, allocation == model::Allocation::Passthrough ? 8 : 4);
    c.requiresEntitlement = chance(0.2);
    if (allocation == model::Allocation::Shared) {
      c.memoryMiB = 16384;
      c.share = model::SharePolicy{8192, 25, 4};
    }
    return c;
  }

  // Nodes 0..3 serve one pool each (h200, h100, a100-10c, v100-8g), the rest any.
  model::Node makeNode(int i) {
    model::Node n;
    n.name = "node-" + std::to_string(i);
    n.ready = chance(0.9);
    n.unschedulable = chance(0.08);
    const int kind = i < 4 ? i : pick(0, 4);
    auto inventory = [&](std::string_view type, int parents) {
      std::vector<model::InventoryParent> out;
      for (int p = 0; p < parents; ++p) {
        model::InventoryParent parent;
        parent.id = n.name + "-gpu" + std::to_string(p);
        parent.healthy = chance(0.98);
        const int total = 4, created = pick(0, 2);
        parent.types[std::string(type)] = model::VgpuSlots{total, created, total - created};
        out.push_back(parent);
      }
      return out;
    };
    if (kind <= 1) {
      n.activeMode = model::NodeMode::VmPassthrough;
      const int count = pick(1, 8);
      n.allocatable.set(kind == 0 ? kH200 : kH100, count);
      n.capacity.set(kind == 0 ? kH200 : kH100, chance(0.97) ? count : count + 1);
    } else if (kind == 2) {
      n.activeMode = model::NodeMode::VmVgpu;
      const int parents = pick(1, 2);
      n.allocatable.set(kA100, parents * 4);
      n.capacity.set(kA100, parents * 4);
      n.inventory = inventory(kA100, parents);
    } else if (kind == 3) {
      n.activeMode = model::NodeMode::PodHami;
      const int gpus = pick(1, 4);
      n.allocatable.set(kHami, gpus);
      n.capacity.set(kHami, gpus);
      if (chance(0.8)) n.inventory = inventory(kHami, gpus);
    } else {
      n.activeMode = model::NodeMode::Disabled;
    }
    n.expectedMode = chance(0.96) ? n.activeMode : model::NodeMode::VmPassthrough;
    return n;
  }

  model::Namespace makeNamespace(const std::string& name, const std::vector<std::string>& ancestors) {
    model::Namespace n;
    n.name = name;
    n.tree[name] = 0;
    int depth = 1;
    for (const auto& a : ancestors) n.tree[a] = depth++;
    return n;
  }

  void build() {
    put(makeClass("h200", model::Allocation::Passthrough, kH200, model::NodeMode::VmPassthrough));
    if (chance(0.6)) put(makeClass("h100", model::Allocation::Passthrough, kH100, model::NodeMode::VmPassthrough));
    put(makeClass("a100-10c", model::Allocation::Vgpu, kA100, model::NodeMode::VmVgpu));
    put(makeClass("v100-8g", model::Allocation::Shared, kHami, model::NodeMode::PodHami));
    const int nodes = pick(4, 9);
    for (int i = 0; i < nodes; ++i) put(makeNode(i));

    std::vector<model::PermittedHostDevice> permitted;
    for (std::string_view r : {kH200, kH100, kA100}) {
      if (chance(0.9)) permitted.push_back({std::string(r), "10DE:2335", r == kA100, false});
    }
    mirror_.permittedHostDevices = permitted;
    writer_.upsert(state::Object(permitted));

    model::BillingPlans plans;
    for (const auto& [name, cls] : mirror_.classes) {
      model::Addon addon;
      addon.id = name + "-std";
      model::GpuGrant grant;
      if (cls.allocation == model::Allocation::Shared) {
        grant.shares = 1;
      } else {
        grant.devices = 1;
      }
      addon.gpu[name] = grant;
      plans.addons[addon.id] = addon;
    }
    mirror_.plans = plans;
    writer_.upsert(state::Object(std::optional<model::BillingPlans>(plans)));
    mirror_.ledger = model::Ledger{{}, {}, true};
    writer_.upsert(state::Object(mirror_.ledger));

    const int orgs = pick(1, 3);
    for (int o = 0; o < orgs; ++o) {
      const std::string org = "org" + std::to_string(o);
      put(makeNamespace(org, {}));
      tenants_.push_back(org);
      for (int p = 0; p < pick(1, 2); ++p) {
        const std::string project = org + "-p" + std::to_string(p);
        put(makeNamespace(project, {org}));
        tenants_.push_back(project);
        if (chance(0.5)) {
          const std::string team = project + "-t";
          put(makeNamespace(team, {project, org}));
          tenants_.push_back(team);
        }
      }
      model::Organization organization;
      organization.ns = org;
      organization.name = org;
      for (const auto& [id, addon] : plans.addons) {
        if (chance(0.7)) organization.addons.push_back({id, pick(0, 2)});
      }
      put(organization);
      syncPlanQuota(organization, chance(0.9));
    }
    put(makeNamespace("loner", {}));
    tenants_.push_back("loner");
    for (const auto& t : tenants_) {
      if (t.find("-p") != std::string::npos && chance(0.4)) projectQuota(t);
      if (chance(0.2)) resourceQuota(t);
    }
    publishGates();
    writer_.flush();
  }

  // HNC's plan-quota of the organization: what its add-ons grant, or (when
  // not `exact`) something else, which the audit finds.
  void syncPlanQuota(const model::Organization& org, bool exact) {
    model::HierarchicalResourceQuota q;
    q.ns = org.ns;
    q.name = std::string(model::kOrgQuotaName);
    q.hard = model::grantedQuota(mirror_, org);
    if (!exact) {
      model::ResourceList perturbed;
      for (const auto& [key, amount] : q.hard) perturbed.set(key, std::max<std::int64_t>(0, amount + pick(-1, 2)));
      q.hard = perturbed;
    }
    q.statusHard = q.hard;
    put(q);
    // The quota controller reports HNC's status.hard in the Organization's
    // status, per profile (devices, or shares of a shared pool).
    model::Organization reported = mirror_.organizations.at(model::objectKey(org.ns, org.name));
    reported.acceleratorStatus.clear();
    for (const auto& [name, cls] : mirror_.classes) {
      const std::string key = model::quotaKey(cls.resourceName);
      if (!q.statusHard.contains(key)) continue;
      auto& usage = reported.acceleratorStatus[name];
      (cls.allocation == model::Allocation::Shared ? usage.shares : usage.devices) =
          model::HardUsed{q.statusHard.get(key), 0};
    }
    put(reported);
  }

  std::string anyKey() {
    std::vector<std::string> keys;
    for (const auto& [name, cls] : mirror_.classes) keys.push_back(model::quotaKey(cls.resourceName));
    return any(keys);
  }

  void projectQuota(const std::string& ns) {
    model::HierarchicalResourceQuota q;
    q.ns = ns;
    q.name = std::string(model::kProjectQuotaName);
    q.hard.set(anyKey(), pick(0, 6));
    q.statusHard = q.hard;
    put(q);
  }

  void resourceQuota(const std::string& ns) {
    model::ResourceQuota q;
    q.ns = ns;
    q.name = "gpu-quota";
    q.hard.set(anyKey(), pick(0, 5));
    put(q);
  }

  const model::DeviceClass& anyClass() {
    auto it = mirror_.classes.begin();
    std::advance(it, pick(0, static_cast<int>(mirror_.classes.size()) - 1));
    return it->second;
  }
  const model::Node& anyNode() {
    auto it = mirror_.nodes.begin();
    std::advance(it, pick(0, static_cast<int>(mirror_.nodes.size()) - 1));
    return it->second;
  }

  void addPod() {
    model::Pod p;
    p.ns = any(tenants_);
    p.name = "pod-" + std::to_string(serial_++);
    p.uid = "uid-" + p.name;
    const model::DeviceClass& cls = anyClass();
    p.containers.push_back(model::ResourceList{{cls.resourceName, pick(1, 3)}});
    if (chance(0.7)) {
      p.nodeName = anyNode().name;
      p.phase = model::PodPhase::Running;
    } else {
      p.phase = chance(0.8) ? model::PodPhase::Pending : model::PodPhase::Succeeded;
    }
    put(p);
  }

  // A new order, placed by the binder's own decision when it can be.
  void orderDevice() {
    model::GpuDevice d;
    d.ns = any(tenants_);
    d.name = "dev-" + std::to_string(serial_++);
    d.uid = "uid-" + d.name;
    d.className = anyClass().name;
    d.count = pick(1, 3);
    d.created = kNow;
    put(d);  // admitted: stored Pending, then the binder decides on the snapshot holding it
    writer_.flush();
    auto snap = writer_.snapshots().read();
    model::HeldAheadView view(snap->cluster(), snap->usage);
    const auto& stored = snap->cluster().devices.at(model::objectKey(d.ns, d.name));
    model::Placement placed = model::placeHeldSet(snap->cluster(), view, model::deviceSetOf(snap->cluster(), stored));
    if (placed.node && chance(0.9)) {
      d.phase = model::DevicePhase::Bound;
      d.node = *placed.node;
      put(d);
    }
  }

  void changeDevice() {
    if (mirror_.devices.empty()) return;
    auto it = mirror_.devices.begin();
    std::advance(it, pick(0, static_cast<int>(mirror_.devices.size()) - 1));
    model::GpuDevice d = it->second;
    switch (pick(0, 3)) {
      case 0: removeSome(mirror_.devices, model::Kind::GpuDevice); return;
      case 1: d.phase = model::DevicePhase::Released; break;
      case 2: d.phase = model::DevicePhase::Lost; break;
      case 3: d.deleting = true; break;
    }
    put(d);
  }

  void changeNode() {
    model::Node n = anyNode();
    switch (pick(0, 4)) {
      case 0: n.ready = !n.ready; break;
      case 1: n.unschedulable = !n.unschedulable; break;
      case 2: n.expectedMode = n.expectedMode == n.activeMode ? model::NodeMode::PodHami : n.activeMode; break;
      case 3: {
        const int index = std::atoi(n.name.c_str() + 5);
        n = makeNode(index);
        break;
      }
      case 4: {
        model::ResourceList changed;
        for (const auto& [r, a] : n.allocatable) changed.set(r, std::max<std::int64_t>(0, a + pick(-1, 1)));
        n.allocatable = changed;
        break;
      }
    }
    put(n);
  }

  void changeQuota() {
    if (chance(0.5) && !mirror_.hrqs.empty()) {
      auto it = mirror_.hrqs.begin();
      std::advance(it, pick(0, static_cast<int>(mirror_.hrqs.size()) - 1));
      model::HierarchicalResourceQuota q = it->second;
      if (q.name == model::kOrgQuotaName) return;  // HNC's plan-quota follows the add-ons
      model::ResourceList changed;
      for (const auto& [k, a] : q.hard) changed.set(k, std::max<std::int64_t>(0, a + pick(-2, 2)));
      q.hard = changed;
      q.statusHard = q.hard;
      put(q);
    } else if (chance(0.5)) {
      projectQuota(any(tenants_));
    } else {
      resourceQuota(any(tenants_));
    }
  }

  void changeAddons() {
    if (mirror_.organizations.empty()) return;
    auto it = mirror_.organizations.begin();
    std::advance(it, pick(0, static_cast<int>(mirror_.organizations.size()) - 1));
    model::Organization org = it->second;
    if (org.addons.empty() || chance(0.3)) {
      const auto& addons = mirror_.plans->addons;
      auto a = addons.begin();
      std::advance(a, pick(0, static_cast<int>(addons.size()) - 1));
      org.addons.push_back({a->first, pick(0, 2)});
    } else {
      auto& a = org.addons[static_cast<std::size_t>(pick(0, static_cast<int>(org.addons.size()) - 1))];
      a.quantity = std::clamp<std::int64_t>(a.quantity + pick(-1, 1), 0, 3);
    }
    put(org);
    syncPlanQuota(org, chance(0.9));
  }

  void changeEntitlement() {
    model::Namespace n = mirror_.namespaces.at(any(tenants_));
    const std::string& cls = anyClass().name;
    auto it = std::find(n.entitledClasses.begin(), n.entitledClasses.end(), cls);
    if (it == n.entitledClasses.end()) {
      n.entitledClasses.push_back(cls);
    } else {
      n.entitledClasses.erase(it);
    }
    put(n);
  }

  void changeClass() {
    model::DeviceClass c = anyClass();
    switch (pick(0, 3)) {
      case 0: c.creationPaused = !c.creationPaused; break;
      case 1: c.maxCount = pick(1, 8); break;
      case 2: c.requiresEntitlement = !c.requiresEntitlement; break;
      case 3:
        // Both acknowledgements of the failure the class published.
        if (!c.gateFailureId.empty()) {
          c.acknowledgements.push_back({c.gateFailureId, "product", "pat@product"});
          c.acknowledgements.push_back({c.gateFailureId, "sre", "sam@sre"});
        }
        break;
    }
    put(c);
  }

  // A running VMI holding some of its namespace's devices.
  void addVmi() {
    std::vector<const model::GpuDevice*> held;
    const std::string ns = any(tenants_);
    for (const auto& [k, d] : mirror_.devices) {
      if (d.ns == ns && model::holdsNodeUnits(d) && chance(0.5)) held.push_back(&d);
    }
    if (held.empty()) return;
    model::VirtualMachineInstance v;
    v.ns = ns;
    v.name = "vm-" + std::to_string(serial_++);
    v.uid = "uid-" + v.name;
    v.phase = "Running";
    for (const auto* d : held) v.heldDevices.push_back(d->name);
    put(v);
  }

  // The auditor: every pool's findings and gate, published into its status.
  void publishGates() {
    for (const auto& [name, cls] : mirror_.classes) {
      const auto findings = model::auditPool(mirror_, cls);
      model::GateState gate = model::evaluateGate(mirror_, cls, findings);
      model::DeviceClass published = cls;
      // Operators acknowledge a cleared failure now and then.
      const bool failing = std::any_of(findings.begin(), findings.end(),
                                       [](const model::Finding& f) { return model::failsClosed(f.code); });
      if (!gate.open && !failing && !cls.gateFailureId.empty() && chance(0.3)) {
        published.acknowledgements.push_back({cls.gateFailureId, "product", "pat@product"});
        published.acknowledgements.push_back({cls.gateFailureId, "sre", "sam@sre"});
        gate = model::evaluateGate(mirror_, published, findings);
      }
      published.gateOpen = gate.open;
      published.gateFailureId = gate.failureId;
      published.gateReason = gate.reason;
      if (!(published == cls)) put(published);
    }
  }

  std::mt19937_64 rng_;
  model::Cluster mirror_;
  extender::CacheWriter writer_;
  controller::VmiWebhook vmi_;
  std::vector<std::string> tenants_;
  int serial_ = 0;
};

std::string deviceReview(const std::string& ns, const std::string& cls, std::int64_t count) {
  const std::string device = R"({"apiVersion":"gpu.tally.dev/v1alpha1","kind":"GPUDevice","metadata":{"name":"ask",)"
                             R"("namespace":")" +
                             ns + R"("},"spec":{"class":")" + cls + R"(","count":)" + std::to_string(count) + "}}";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"gpu.tally.dev","version":"v1alpha1","kind":"GPUDevice"},)"
         R"("resource":{"group":"gpu.tally.dev","version":"v1alpha1","resource":"gpudevices"},)"
         R"("name":"ask","namespace":")" +
         ns + R"(","operation":"CREATE","userInfo":{"username":"tenant"},"dryRun":true,"object":)" + device +
         R"(,"oldObject":null}})";
}

std::string vmiReview(const std::string& ns, const std::string& cls, std::int64_t count) {
  const std::string templates = R"([{\"class\":\")" + cls + R"(\",\"count\":)" + std::to_string(count) + "}]";
  const std::string vmi = R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"ask",)"
                          R"("namespace":")" +
                          ns + R"(","annotations":{"gpu.tally.dev/device-templates":")" + templates +
                          R"("}},"spec":{"domain":{"devices":{}}}})";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-2",)"
         R"("kind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachineInstance"},)"
         R"("resource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachineinstances"},)"
         R"("name":"ask","namespace":")" +
         ns + R"(","operation":"CREATE","userInfo":{"username":"tenant"},"dryRun":true,"object":)" + vmi +
         R"(,"oldObject":null}})";
}

// A GPU pod's CREATE as the API server sends it, after every mutation:
// no uid, the node and scheduler given.
std::string podReview(const std::string& ns, const std::string& resource, std::int64_t count, const std::string& node,
                      const std::string& scheduler) {
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"ask-pod","namespace":")" + ns +
                          R"("},"spec":{"schedulerName":")" + scheduler + R"(",)" +
                          (node.empty() ? std::string() : R"("nodeName":")" + node + R"(",)") +
                          R"("containers":[{"name":"c","resources":{"requests":{")" + resource + R"(":")" +
                          std::to_string(count) + R"("}}}]}})";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-3",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},)"
         R"("resource":{"group":"","version":"v1","resource":"pods"},)"
         R"("name":"ask-pod","namespace":")" +
         ns + R"(","operation":"CREATE","userInfo":{"username":"tenant"},"dryRun":true,"object":)" + pod +
         R"(,"oldObject":null}})";
}

// The test-only switch that shows a relation can fail: the door on one side
// of the perturbed relation is asked about one unit more than the other side.
Relation perturbed = kRelations;
std::int64_t bump(Relation r) { return r == perturbed ? 1 : 0; }

bool hasCode(const std::string& message, model::Code code) {
  return message.find("[" + std::string(model::toString(code)) + "]") != std::string::npos;
}

// Every question of one event, on one snapshot.
void askDoors(World& world, Counts& counts, int questions) {
  auto snap = world.writer().snapshots().read();
  const model::Cluster& cluster = snap->cluster();
  const model::Cluster& mirror = world.mirror();
  const model::TotalsCapacityView totals(mirror, model::computeUsage(mirror));
  const controller::GpuDeviceWebhookOptions webhookOptions;

  // The index against recomputation: the writer's live index, then the published sums.
  bool indexAgrees = true;
  std::string indexWhy;
  const model::UsageTotals recomputed = model::computeUsage(mirror);
  world.writer().post(
      [&](model::UsageIndex& index) {
        if (!(index.totals() == recomputed)) {
          indexAgrees = false;
          indexWhy = "writer's index totals differ from computeUsage";
        }
      },
      true);
  world.writer().flush();
  for (const auto& [name, node] : mirror.nodes) {
    for (const auto& [cname, cls] : mirror.classes) {
      const auto& r = cls.resourceName;
      if (snap->usage.nodeUsed(name, r) != totals.nodeUsed(name, r) ||
          snap->usage.nodeHeld(name, r) != totals.nodeHeld(name, r)) {
        indexAgrees = false;
        indexWhy = "node " + name + " " + r + ": snapshot used/held " + std::to_string(snap->usage.nodeUsed(name, r)) +
                   "/" + std::to_string(snap->usage.nodeHeld(name, r)) + ", recomputed " +
                   std::to_string(totals.nodeUsed(name, r)) + "/" + std::to_string(totals.nodeHeld(name, r));
      }
    }
  }
  for (const auto& [nsName, ns] : mirror.namespaces) {
    for (const auto& [cname, cls] : mirror.classes) {
      const std::string key = model::quotaKey(cls.resourceName);
      if (snap->usage.subtreeUsed(nsName, key) != totals.subtreeUsed(nsName, key) ||
          snap->usage.namespaceUsed(nsName, key) != totals.namespaceUsed(nsName, key)) {
        indexAgrees = false;
        indexWhy = "namespace " + nsName + " " + key + ": budget usage differs";
      }
    }
  }
  for (const auto& [cname, cls] : cluster.classes) {
    if (snap->usage.poolFreeUnits(cluster, cls) != totals.poolFreeUnits(mirror, mirror.classes.at(cname))) {
      indexAgrees = false;
      indexWhy = "pool " + cname + ": free units " + std::to_string(snap->usage.poolFreeUnits(cluster, cls)) +
                 " vs recomputed " + std::to_string(totals.poolFreeUnits(mirror, mirror.classes.at(cname)));
    }
  }
  counts.check(IndexVsRecompute, indexAgrees, indexWhy);

  // tallyctl report on the recomputed cluster against the snapshot and the published gates.
  const model::Report report = model::buildReport(mirror);
  for (const auto& pool : report.pools) {
    const model::DeviceClass& published = cluster.classes.at(pool.pool);
    counts.check(ReportVsGate, pool.gate.open == published.gateOpen,
                 "pool " + pool.pool + ": report gate " + (pool.gate.open ? "open" : "closed") + ", published " +
                     (published.gateOpen ? "open" : "closed"));
  }
  for (const auto& row : report.nodes) {
    if (row.pool.empty()) continue;
    const std::int64_t free = model::freeUnits(cluster.nodes.at(row.name), cluster.classes.at(row.pool), snap->usage);
    counts.check(ReportVsSnapshotFree, free == row.unitsFree,
                 "node " + row.name + ": report free " + std::to_string(row.unitsFree) + ", snapshot free " +
                     std::to_string(free));
  }

  for (int q = 0; q < questions; ++q) {
    const std::string ns = world.any(world.tenants());
    const model::CatalogOptions catalog = model::catalogOptions(cluster, snap->usage, ns);
    const model::CatalogOptions recomputedCatalog = model::catalogOptions(mirror, totals, ns);
    bool same = catalog.classes.size() == recomputedCatalog.classes.size();
    for (std::size_t i = 0; same && i < catalog.classes.size(); ++i) {
      const auto& a = catalog.classes[i];
      const auto& b = recomputedCatalog.classes[i];
      same = a.className == b.className && a.largestCount == b.largestCount && a.refusals == b.refusals;
    }
    counts.check(
        CatalogSnapshotVsTotals, same,
        "namespace " + ns + ": " + codec::encodeCatalog(catalog) + " vs " + codec::encodeCatalog(recomputedCatalog));
    const auto endpoint = controller::optionsResponse(*snap, ns);
    counts.check(EndpointVsCatalog, endpoint.status == 200 && endpoint.body == codec::encodeCatalog(catalog) + "\n",
                 "namespace " + ns + ": GET /options " + std::to_string(endpoint.status));

    for (const auto& option : catalog.classes) {
      const model::DeviceClass& cls = cluster.classes.at(option.className);
      const std::int64_t n = world.pick(1, static_cast<int>(std::max<std::int64_t>(1, cls.maxCount)) + 1);
      ++counts.cases;
      const std::string what = "class " + cls.name + " x" + std::to_string(n) + " in " + ns;

      auto request = runtime::admission::decodeAdmissionReview(deviceReview(ns, cls.name, n + bump(CatalogVsWebhook)));
      ASSERT_TRUE(request) << request.error().message;
      const auto answer = controller::reviewGpuDevice(*snap, *request, webhookOptions);
      (answer.allowed ? counts.admitted : counts.refused)++;
      for (std::size_t at = answer.message.find('['); at != std::string::npos; at = answer.message.find('[', at + 1)) {
        const auto end = answer.message.find(']', at);
        if (end != std::string::npos) ++counts.refusalCodes[answer.message.substr(at + 1, end - at - 1)];
      }
      counts.check(CatalogVsWebhook, (n <= option.largestCount) == answer.allowed,
                   what + ": catalogue largest " + std::to_string(option.largestCount) + ", webhook " +
                       (answer.allowed ? "admits" : "refuses: " + answer.message));

      // The binder decides on a device the store holds (Pending, as the
      // webhook's admission leaves it): the same snapshot with it added.
      model::GpuDevice device;
      device.ns = ns;
      device.name = "ask";
      device.uid = "uid-ask";
      device.className = cls.name;
      device.count = n + bump(WebhookVsBinder);
      device.created = kNow + 1;
      world.writer().upsert(state::Object(device));
      world.writer().flush();
      std::optional<std::string> placedOn;
      std::string placedWhy;
      {
        auto withDevice = world.writer().snapshots().read();
        model::HeldAheadView ahead(withDevice->cluster(), withDevice->usage);
        // As the binder decides (device_binder.cpp): the device's set, then placeHeldSet.
        const model::Placement placed = model::placeHeldSet(
            withDevice->cluster(), ahead,
            model::deviceSetOf(withDevice->cluster(), withDevice->cluster().devices.at(model::objectKey(ns, "ask"))));
        placedOn = placed.node;
        placedWhy = placed.decision.summary();
      }
      world.writer().remove(model::Kind::GpuDevice, ns, "ask");
      world.writer().flush();
      counts.check(WebhookVsBinder, answer.allowed == placedOn.has_value(),
                   what + ": webhook " + (answer.allowed ? "admits" : "refuses: " + answer.message) + "; binder " +
                       (placedOn ? "places on " + *placedOn : "finds no node: " + placedWhy));

      const bool permitted = cls.workload == model::Workload::Vm && cluster.permittedHostDevices &&
                             std::any_of(cluster.permittedHostDevices->begin(), cluster.permittedHostDevices->end(),
                                         [&](const auto& p) { return p.resourceName == cls.resourceName; });
      if (permitted) {
        auto vmiRequest = runtime::admission::decodeAdmissionReview(vmiReview(ns, cls.name, n + bump(WebhookVsVmi)));
        ASSERT_TRUE(vmiRequest) << vmiRequest.error().message;
        const auto vmiAnswer = world.vmi().review(*vmiRequest);
        if (vmiAnswer.allowed) ++counts.vmiAdmitted;
        counts.check(WebhookVsVmi, answer.allowed == vmiAnswer.allowed,
                     what + ": webhook " + (answer.allowed ? "admits" : "refuses: " + answer.message) + "; VMI " +
                         (vmiAnswer.allowed ? "admits" : "refuses: " + vmiAnswer.message));
      }

      const bool gateRefusal = !answer.allowed && hasCode(answer.message, model::Code::GateClosed);
      counts.check(GateVsDoors, gateRefusal == !cls.gateOpen,
                   what + ": published gate " + (cls.gateOpen ? "open" : "closed") + ", webhook " +
                       (answer.allowed ? "admits" : answer.message));

      // The extender, for a new GPU pod asking n units of the class's resource.
      std::string body;
      model::Pod pod;
      pod.ns = ns;
      pod.name = "ask-pod";
      pod.uid = "uid-ask-pod";
      pod.phase = model::PodPhase::Pending;
      pod.containers.push_back(model::ResourceList{{cls.resourceName, n}});
      extender::wire::ExtenderArgs args;
      args.pod = pod;
      args.pod.containers.front().set(cls.resourceName, n + bump(ExtenderVsModel));
      for (const auto& [name, node] : cluster.nodes) args.nodeNames.push_back(name);
      const extender::wire::FilterResult filtered = extender::filterNodes(*snap, args);
      const model::PodDemand demand = model::podDemand(mirror, totals, pod);
      std::set<std::string_view> passed(filtered.passed.begin(), filtered.passed.end());
      std::set<std::string_view> unresolvable;
      for (const auto& [node, message] : filtered.unresolvable) unresolvable.insert(node);
      // The pod doors on the same pod: the validating door once with the node
      // left to Tally's scheduler, then, per node, both doors with the node
      // preset (the mutating door decides it; the validating one is its backstop).
      controller::PodWebhookOptions podOptions;
      auto review = [&](const std::string& node, const std::string& scheduler, bool route) {
        const std::int64_t asked = n + (route ? bump(PlacementVsExtender) : 0);
        auto req = runtime::admission::decodeAdmissionReview(podReview(ns, cls.resourceName, asked, node, scheduler));
        EXPECT_TRUE(req) << req.error().message;
        return route ? controller::reviewGpuPodRoute(*snap, *req, podOptions)
                     : controller::reviewGpuPod(*snap, *req, podOptions);
      };
      const auto unplaced = review("", "tally-scheduler", false);
      const auto bypass =
          review("", perturbed == SchedulerBypassRefused ? "tally-scheduler" : "default-scheduler", false);
      counts.check(SchedulerBypassRefused, !bypass.allowed && hasCode(bypass.message, model::Code::SchedulerBypass),
                   what + ": pod on default-scheduler " + (bypass.allowed ? "admitted" : bypass.message));
      for (const auto& [name, node] : mirror.nodes) {
        const auto routed = review(name, "default-scheduler", true);
        const auto preset = review(name, "tally-scheduler", false);
        const bool doorsAdmit = routed.allowed && unplaced.allowed;
        counts.check(PlacementVsExtender, doorsAdmit == passed.contains(name) && preset.allowed == doorsAdmit,
                     what + " pod preset on " + name + ": placement door " +
                         (routed.allowed ? "admits" : "refuses: " + routed.message) + ", validating door " +
                         (unplaced.allowed ? "admits" : "refuses: " + unplaced.message) +
                         " (preset: " + (preset.allowed ? "admits" : preset.message) + "), extender " +
                         (passed.contains(name) ? "passes" : "fails"));
      }
      for (const auto& [name, node] : mirror.nodes) {
        const model::NodeVerdict v = model::filterNode(mirror, totals, demand, node);
        if (v.verdict == model::Verdict::Fits) ++counts.podFits;
        const bool agree = (v.verdict == model::Verdict::Fits) == passed.contains(name) &&
                           (v.verdict == model::Verdict::Unresolvable) == unresolvable.contains(name);
        counts.check(ExtenderVsModel, agree,
                     what + " pod on " + name + ": model " +
                         (v.verdict == model::Verdict::Fits ? "fits" : (v.reason ? v.reason->message : "refuses")) +
                         ", extender " + (passed.contains(name) ? "passes" : "fails"));
      }
    }
  }
}

// Sanitizer builds (make test-sanitizers) run ten times slower: fewer cases by default.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::int64_t kDefaultCases = 2000;
#else
constexpr std::int64_t kDefaultCases = 10000;
#endif

TEST(EveryDoorAgrees, RandomClustersAndEvents) {
  const std::int64_t target = envOr("TALLY_DIFFERENTIAL_CASES", kDefaultCases);
  const std::uint64_t seed0 = static_cast<std::uint64_t>(envOr("TALLY_DIFFERENTIAL_SEED", 17));
  const int eventsPerCluster = 30;
  Counts counts;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t seed = seed0; counts.cases < target; ++seed) {
    World world(seed);
    ++counts.clusters;
    askDoors(world, counts, 1);
    for (int e = 0; e < eventsPerCluster && counts.cases < target; ++e) {
      world.event();
      ++counts.events;
      askDoors(world, counts, 1);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "every door agrees: " << counts.cases << " cases (" << counts.admitted << " admitted, " << counts.refused
            << " refused) over " << counts.events << " events in " << counts.clusters << " clusters, " << seconds
            << " s\n";
  std::int64_t total = 0;
  for (int r = 0; r < kRelations; ++r) {
    std::cout << "  " << kRelationNames[r] << ": " << counts.checked[r] << " checked, " << counts.disagreed[r]
              << " disagreements\n";
    total += counts.disagreed[r];
    EXPECT_GT(counts.checked[r], 0) << kRelationNames[r] << " was never checked";
  }
  std::cout << "  refusal reasons:";
  for (const auto& [code, n] : counts.refusalCodes) std::cout << ' ' << code << '=' << n;
  std::cout << '\n';
  for (const auto& e : counts.examples) std::cout << "  e.g. " << e << '\n';
  EXPECT_EQ(total, 0) << "doors disagree (see the examples above)";
  // Both answers occur, or the comparison proves little.
  std::cout << "  VMI plans admitted: " << counts.vmiAdmitted << ", pod fits on a node: " << counts.podFits << '\n';
  EXPECT_GT(counts.admitted, counts.cases / 10);
  EXPECT_GT(counts.refused, counts.cases / 10);
  EXPECT_GT(counts.vmiAdmitted, 0);
  EXPECT_GT(counts.podFits, 0);
}

// Each relation the switch can perturb is shown to fail when one of its doors
// answers another question: a relation that cannot fail proves nothing.
TEST(EveryDoorAgrees, EachRelationCatchesAPerturbedDoor) {
  const std::int64_t target = envOr("TALLY_DIFFERENTIAL_PERTURBED_CASES", 1500);
  for (Relation r : {CatalogVsWebhook, WebhookVsBinder, WebhookVsVmi, ExtenderVsModel, PlacementVsExtender,
                     SchedulerBypassRefused}) {
    perturbed = r;
    Counts counts;
    for (std::uint64_t seed = 101; counts.cases < target; ++seed) {
      World world(seed);
      askDoors(world, counts, 1);
      for (int e = 0; e < 30 && counts.cases < target; ++e) {
        world.event();
        askDoors(world, counts, 1);
      }
    }
    perturbed = kRelations;
    std::cout << "  perturbed " << kRelationNames[r] << ": " << counts.disagreed[r] << " of " << counts.checked[r]
              << " disagree\n";
    EXPECT_GT(counts.disagreed[r], 0) << kRelationNames[r] << " did not notice its perturbed door";
  }
}

}  // namespace
}  // namespace tally
