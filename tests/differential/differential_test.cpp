// "Every door agrees": random clusters and random event sequences, in every
// configuration a binary runs in; after each event every door is asked the
// same question on the same snapshot, through the functions the binaries'
// handlers run (the GPUDevice, VMI, raw-pod, placement, launcher,
// Organization and ResourceClaim webhooks, GET /options, the extender's
// filter, the DeviceBinder's decision, the PoolAuditor's audit, tallyctl
// report and plan),
// and the incremental index is compared with computeUsage() of the same
// objects. Every disagreement is counted by relation; the goal is zero.
// tests/differential/README.md lists the relations and what perturbs each.
//
// TALLY_DIFFERENTIAL_CASES sets how many door questions are asked (default
// 10,000, a few seconds; `make bench` asks 100,000), TALLY_DIFFERENTIAL_SEED
// the first seed.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tally/codec/catalog_json.hpp"
#include "tally/controller/catalog_endpoint.hpp"
#include "tally/controller/claim_webhook.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/controller/organization_webhook.hpp"
#include "tally/controller/pod_webhooks.hpp"
#include "tally/controller/pool_auditor.hpp"
#include "tally/controller/vmi_webhook.hpp"
#include "tally/extender/assumptions.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/catalog.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/index.hpp"
#include "tally/model/placement.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/quota.hpp"
#include "tally/model/report.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/state/kinds.hpp"

namespace tally {
namespace {

constexpr model::Timestamp kNow = 1'800'000'000;
constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";
constexpr std::string_view kH100 = "nvidia.com/GH100_H100_SXM_80GB";
constexpr std::string_view kA100 = "nvidia.com/A100-10C";
constexpr std::string_view kHami = "nvidia.com/gpu";
// The DRA pool: a driver's R100 GPUs on their own nodes, asked for through
// the DeviceClass r100.example.com (claims) or its extended resource (pods).
constexpr std::string_view kDraDriver = "gpu.example.com";
constexpr std::string_view kDraDeviceClass = "r100.example.com";

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
  LauncherPinVsExtender,  // the launcher door's pin for a VMI's pod <=> the node(s) the extender passes its launcher on
  OrganizationVsPlan,     // the Organization webhook admits an add-on change <=> tallyctl plan (model::plan) allows it
  UnsyncedRefused,        // a cache not synced: every door refuses (webhooks, VMI, pods, extender, /options, binder)
  UnorganizedRefused,     // (refuse policy) an order in a namespace under no Organization is refused at every door
  UndecidedClosed,        // (published gates) a class no auditor decided yet is refused "not audited yet"
  StaleRefused,           // (evaluated gates) caches older than the staleness bound: orders refused StaleCapacity
  BindVsFilter,           // the extender's bind records a pending pod's placement on N <=> its filter passes N
  ClaimVsPodDoor,  // (DRA class) the claim door's budget, gate and tenancy refusals == the pod door's for its resource
  ClaimPodExtenderVsModel,  // a pod naming a claim of the world: extender filter per node == model::filterNode
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
                                                    "another scheduler refused at the pod door",
                                                    "launcher door pin <=> extender on the launcher",
                                                    "Organization webhook <=> tallyctl plan",
                                                    "unsynced cache refused at every door",
                                                    "unorganized namespace refused at every door",
                                                    "undecided class closed 'not audited yet'",
                                                    "stale caches refused (auditor off)",
                                                    "extender bind <=> extender filter",
                                                    "claim door <=> pod door (DRA class)",
                                                    "extender filter == model filterNode (claim pod)"};

struct Counts {
  std::int64_t checked[kRelations] = {};
  std::int64_t disagreed[kRelations] = {};
  std::int64_t cases = 0, events = 0, clusters = 0, admitted = 0, refused = 0, podFits = 0, vmiAdmitted = 0;
  std::vector<std::string> examples;
  std::map<std::string, std::int64_t> refusalCodes;    // every code of every refused order
  std::map<std::string, std::int64_t> configurations;  // clusters per configuration
  std::map<std::string, std::int64_t> closedBy;        // closed gates by their reason's first finding
  void check(Relation r, bool agree, const std::string& what) {
    ++checked[r];
    if (agree) return;
    ++disagreed[r];
    if (examples.size() < 20) examples.push_back(std::string(kRelationNames[r]) + ": " + what);
  }
};

// The configurations a world runs in, by seed: the tenancy policy (the
// product's default refuses GPU use outside every Organization), where the
// doors take the gate from (an auditor's publication, or evaluated by the
// doors with the auditor off), and whether a ledger source is configured.
struct Config {
  bool refuseUnorganized = true;
  bool evaluatedGates = false;
  bool ledgerConfigured = true;
  bool organizationsWatched = true;  // --watch-organizations (false only with the allow policy)
};
Config configFor(std::uint64_t seed) {
  const bool refuse = seed % 2 == 0;
  return {refuse, (seed / 2) % 2 == 1, (seed / 4) % 2 == 0, refuse || (seed / 8) % 2 == 0};
}

std::set<model::Kind> watchedKinds(const Config& config) {
  std::set<model::Kind> kinds;
  for (const auto& info : state::kKinds) {
    if (info.kind == model::Kind::Ledger && !config.ledgerConfigured) continue;
    if (info.kind == model::Kind::Organization && !config.organizationsWatched) continue;
    kinds.insert(info.kind);
  }
  return kinds;
}

extender::CacheWriter::Options withClock(extender::CacheWriter::Options o, const model::Timestamp* clock) {
  o.clock = [clock] { return *clock; };
  return o;
}

extender::CacheWriter::Options writerOptions(const Config& config) {
  extender::CacheWriter::Options o;
  o.publishInterval = std::chrono::milliseconds(5);
  o.assumeTtl = std::chrono::milliseconds(30'000);
  o.watched = watchedKinds(config);
  o.clock = [] { return kNow; };
  o.gates = config.evaluatedGates ? model::GateSource::Evaluated : model::GateSource::Published;
  // Evaluated on every publication: a pod's change (which leaves the cluster
  // copy alone) would otherwise reach the gate within this bound only.
  o.gateEvaluationInterval = std::chrono::milliseconds(0);
  o.tenancy.unorganized =
      config.refuseUnorganized ? model::UnorganizedGpuPolicy::Refuse : model::UnorganizedGpuPolicy::Allow;
  return o;
}

// One random cluster, its mirror (every object, pods included) and the writer
// the doors' snapshots come from, fed the same events.
class World {
 public:
  explicit World(std::uint64_t seed)
      : config_(configFor(seed)),
        rng_(seed),
        writer_(withClock(writerOptions(config_), &clock_)),
        vmi_(nullptr, controller::VmiWebhookOptions{}) {
    mirror_.now = kNow;
    mirror_.tenancy.unorganized = writerOptions(config_).tenancy.unorganized;
    mirror_.gates = writerOptions(config_).gates;
    mirror_.markAllSynced();
    if (!config_.ledgerConfigured) mirror_.markNotConfigured(model::Kind::Ledger);
    if (!config_.organizationsWatched) mirror_.markNotConfigured(model::Kind::Organization);
    mirror_.ledger.loaded = true;
    vmi_.readFrom(writer_.snapshots());
    build();
    for (model::Kind kind : watchedKinds(config_)) writer_.setSynced(kind, true);
    writer_.flush();
  }

  const Config& config() const { return config_; }
  const std::set<std::string>& undecided() const { return undecided_; }
  // A watched kind whose cache goes unsynced (a watch restarting), and back.
  model::Kind unsync() {
    const std::set<model::Kind> watched = watchedKinds(config_);
    const std::vector<model::Kind> kinds(watched.begin(), watched.end());
    const model::Kind kind = any(kinds);
    writer_.setSynced(kind, false);
    writer_.flush();
    return kind;
  }
  // The writer's clock `seconds` past the caches' last sync, and back.
  void age(model::Timestamp seconds) {
    clock_ = kNow + seconds;
    writer_.flush();
  }
  void resync(model::Kind kind) {
    writer_.setSynced(kind, true);
    writer_.flush();
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
    switch (pick(0, mirror_.classes.contains("r100") ? 17 : 14)) {
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
      case 12: changeRecord(); break;
      case 13: forgetDecision(); break;
      case 14: addVmi(); break;
      case 15: addClaim(); break;
      case 16: changeClaim(); break;
      case 17: changeDraInventory(); break;
    }
    model::foldDraInventory(mirror_);  // what the writer's index keeps current
    // The auditor gets to a class it had not decided.
    for (auto it = undecided_.begin(); it != undecided_.end();) it = chance(0.3) ? undecided_.erase(it) : std::next(it);
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
    } else if constexpr (std::is_same_v<T, model::ResourceSlice>) {
      mirror_.resourceSlices[object.name] = object;
    } else if constexpr (std::is_same_v<T, model::ResourceClaim>) {
      mirror_.resourceClaims[model::objectKey(object.ns, object.name)] = object;
    } else if constexpr (std::is_same_v<T, model::DeviceTaintRule>) {
      mirror_.deviceTaintRules[object.name] = object;
    } else if constexpr (std::is_same_v<T, model::Organization>) {
      if (!config_.organizationsWatched) return;  // in the API server, read by no binary here
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
    const int kind = draNodes_.contains(n.name) ? 4 : i < 4 ? i : pick(0, 4);
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
      const int count = pick(2, 8);
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
    // Most worlds also sell a DRA pool, on nodes of their own.
    const int draNodes = chance(0.7) ? pick(1, 3) : 0;
    for (int i = nodes; i < nodes + draNodes; ++i) draNodes_.insert("node-" + std::to_string(i));
    if (draNodes > 0) {
      model::DeviceClass c = makeClass("r100", model::Allocation::Passthrough,
                                       model::draImplicitResourceName(kDraDeviceClass), model::NodeMode::Unset);
      c.workload = model::Workload::Pod;
      c.dra = model::DraSelection{std::string(kDraDriver), std::string(kDraDeviceClass), {{"productName", "R100"}}, ""};
      put(c);
    }
    for (int i = 0; i < nodes + draNodes; ++i) put(makeNode(i));
    for (const auto& node : draNodes_) publishSlices(node, 1);

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
    // An operator-only reservation add-on of the h200 profile (seed 000).
    model::Addon reserved;
    reserved.id = "h200-reserved";
    reserved.selfService = false;
    reserved.gpu["h200"] = model::GpuGrant{1, 0, 0, 0};
    plans.addons[reserved.id] = reserved;
    mirror_.plans = plans;
    writer_.upsert(state::Object(std::optional<model::BillingPlans>(plans)));
    mirror_.ledger = model::Ledger{{}, {}, true};

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
        if (id == "h200-reserved") continue;
        if (chance(0.8)) organization.addons.push_back({id, pick(0, 2)});
      }
      // A reservation: the add-on and its ledger record (pending, active or
      // releasing), its devices now and then not what the add-on grants.
      if (chance(0.35)) {
        const std::int64_t devices = pick(1, 2);
        organization.addons.push_back({"h200-reserved", devices});
        const model::ReservationState state = any(
            std::vector<model::ReservationState>{model::ReservationState::Pending, model::ReservationState::Active,
                                                 model::ReservationState::Active, model::ReservationState::Releasing});
        mirror_.ledger.records.push_back(reservation("res-" + org, org, chance(0.9) ? devices : devices + 1, state));
      }
      put(organization);
      syncPlanQuota(organization, chance(0.9));
    }
    if (config_.ledgerConfigured) {
      writer_.upsert(state::Object(mirror_.ledger));
    } else {
      mirror_.ledger.records.clear();  // no source: the doors know of no record
    }
    put(makeNamespace("loner", {}));
    tenants_.push_back("loner");
    for (const auto& t : tenants_) {
      if (t.find("-p") != std::string::npos && chance(0.4)) projectQuota(t);
      if (chance(0.2)) resourceQuota(t);
    }
    model::foldDraInventory(mirror_);
    publishGates();
    writer_.flush();
  }

  // The driver's slices of a DRA node's pool (named after the node) at
  // `generation`: one or two slices of R100s, a device now and then tainted
  // NoSchedule, now and then a NIC of another class beside them; now and then
  // the second slice not published yet (the pool unknown until it is).
  void publishSlices(const std::string& node, std::int64_t generation) {
    for (auto it = mirror_.resourceSlices.begin(); it != mirror_.resourceSlices.end();) {
      if (it->second.nodeName != node) {
        ++it;
        continue;
      }
      writer_.remove(model::Kind::ResourceSlice, "", it->first);
      it = mirror_.resourceSlices.erase(it);
    }
    const int count = pick(1, 2);
    int device = 0;
    for (int part = 0; part < count; ++part) {
      if (part == 1 && chance(0.15)) break;
      model::ResourceSlice slice;
      slice.name = node + "-slice-" + std::to_string(part);
      slice.driver = std::string(kDraDriver);
      slice.pool = node;
      slice.nodeName = node;
      slice.generation = generation;
      slice.resourceSliceCount = count;
      for (int d = pick(1, 4); d > 0; --d) {
        model::DraDevice gpu;
        gpu.name = "gpu-" + std::to_string(device++);
        gpu.attributes["productName"] = chance(0.95) ? "R100" : "NIC";
        if (chance(0.08)) gpu.taints.push_back({"gpu.example.com/xid", "79", model::DraTaintEffect::NoSchedule});
        slice.devices.push_back(std::move(gpu));
      }
      put(slice);
    }
  }

  // The pool's healthy member devices on `node` no claim holds.
  std::vector<std::string> freeDraDevices(const std::string& node) {
    std::set<std::string> taken;
    for (const auto& [key, claim] : mirror_.resourceClaims)
      for (const auto& r : claim.results) taken.insert(r.pool + "/" + r.device);
    std::vector<std::string> out;
    const model::Node& n = mirror_.nodes.at(node);
    for (const auto& slice : n.dra) {
      if (!slice.unknown.empty()) continue;
      for (const auto& d : slice.devices) {
        if (d.attributes.count("productName") && d.attributes.at("productName") == "R100" && d.taints.empty() &&
            !taken.contains(slice.pool + "/" + d.name))
          out.push_back(d.name);
      }
    }
    return out;
  }

  // The scheduler's allocation of a claim's devices on one node, if some
  // node has them free; now and then on one that has not (around the doors).
  void allocate(model::ResourceClaim& claim) {
    const std::int64_t count = claim.requests.front().choices.front().count;
    std::vector<std::string> nodes(draNodes_.begin(), draNodes_.end());
    std::shuffle(nodes.begin(), nodes.end(), rng_);
    for (const auto& node : nodes) {
      std::vector<std::string> free = freeDraDevices(node);
      if (static_cast<std::int64_t>(free.size()) < count && !chance(0.05)) continue;
      claim.allocated = true;
      claim.allocatedNode = node;
      for (std::int64_t i = 0; i < count; ++i) {
        const std::string device =
            i < static_cast<std::int64_t>(free.size()) ? free[static_cast<std::size_t>(i)] : "gpu-" + std::to_string(i);
        claim.results.push_back(
            {"gpu", std::string(kDraDriver), node, device, claim.requests.front().choices.front().adminAccess, "", {}});
      }
      return;
    }
  }

  // A tenant's claim of one or two R100s (now and then an adminAccess one),
  // allocated at once or left waiting for the allocator.
  void addClaim() {
    model::ResourceClaim claim;
    claim.ns = any(tenants_);
    claim.name = "claim-" + std::to_string(serial_++);
    claim.uid = "uid-" + claim.name;
    model::DraRequestChoice choice;
    choice.deviceClassName = std::string(kDraDeviceClass);
    choice.count = pick(1, 2);
    choice.adminAccess = chance(0.05);
    claim.requests.push_back({"gpu", {choice}});
    if (chance(0.6)) allocate(claim);
    put(claim);
  }

  void changeClaim() {
    if (mirror_.resourceClaims.empty()) return addClaim();
    auto it = mirror_.resourceClaims.begin();
    std::advance(it, pick(0, static_cast<int>(mirror_.resourceClaims.size()) - 1));
    model::ResourceClaim claim = it->second;
    switch (pick(0, 2)) {
      case 0: removeSome(mirror_.resourceClaims, model::Kind::ResourceClaim); return;
      case 1:
        if (claim.allocated) return;
        allocate(claim);
        break;
      case 2: claim.deleting = true; break;
    }
    put(claim);
  }

  // The driver republishes a node's pool (a new generation), or an
  // administrator taints one of its devices by a DeviceTaintRule, or lifts one.
  void changeDraInventory() {
    std::vector<std::string> nodes(draNodes_.begin(), draNodes_.end());
    const std::string node = any(nodes);
    switch (pick(0, 2)) {
      case 0: {
        std::int64_t generation = 1;
        for (const auto& [name, slice] : mirror_.resourceSlices)
          if (slice.nodeName == node) generation = std::max(generation, slice.generation + 1);
        publishSlices(node, generation);
        break;
      }
      case 1: {
        model::DeviceTaintRule rule;
        rule.name = "taint-" + std::to_string(serial_++);
        rule.driver = std::string(kDraDriver);
        rule.pool = node;
        rule.device = "gpu-" + std::to_string(pick(0, 3));
        rule.taint = {"example.com/maintenance", "planned", model::DraTaintEffect::NoSchedule};
        put(rule);
        break;
      }
      case 2: removeSome(mirror_.deviceTaintRules, model::Kind::DeviceTaintRule); break;
    }
  }

  // HNC's plan-quota of the organization: what its add-ons grant, or (when
  // not `exact`) something else, which the audit finds.
  void syncPlanQuota(const model::Organization& org, bool exact) {
    model::HierarchicalResourceQuota q;
    q.ns = org.ns;
    q.name = std::string(model::kOrgQuotaName);
    // As the quota controller writes it: every GPU key, 0 where nothing grants it.
    const model::PlanQuota desired = model::desiredPlanQuota(mirror_, org);
    q.hard = desired.known() ? desired.hard : model::grantedQuota(mirror_, org);
    if (!exact) {
      model::ResourceList perturbed;
      for (const auto& [key, amount] : q.hard) perturbed.set(key, std::max<std::int64_t>(0, amount + pick(-1, 2)));
      q.hard = perturbed;
    }
    q.statusHard = q.hard;
    put(q);
    // The quota controller reports HNC's status.hard in the Organization's
    // status, per profile (devices, or shares of a shared pool).
    auto known = mirror_.organizations.find(model::objectKey(org.ns, org.name));
    if (known == mirror_.organizations.end()) return;  // Organizations unwatched
    model::Organization reported = known->second;
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
      // Placed where Tally's filter lets it run; now and then around the
      // doors (another scheduler before the doors closed that way), which
      // may over-commit the node.
      const model::TotalsCapacityView view(mirror_, model::computeUsage(mirror_));
      const model::PodDemand demand = model::podDemand(mirror_, view, p);
      std::vector<std::string> fits;
      for (const auto& [name, node] : mirror_.nodes) {
        if (model::filterNode(mirror_, view, demand, node).verdict == model::Verdict::Fits) fits.push_back(name);
      }
      if (fits.empty() && !chance(0.15)) return;
      p.nodeName = fits.empty() ? anyNode().name : any(fits);
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
    model::Placement placed = controller::binderPlacement(snap->cluster(), view, stored, stored);
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

  static model::ReservationRecord reservation(std::string id, std::string org, std::int64_t devices,
                                              model::ReservationState state) {
    model::ReservationRecord r;
    r.id = std::move(id);
    r.organization = std::move(org);
    r.profileId = "h200";
    r.devices = devices;
    r.state = state;
    r.requestedAt = kNow - 7200;
    r.startsAt = kNow - 7200;
    r.addonId = "h200-reserved";
    r.billingReference = "TICKET-" + r.organization;
    r.source = r.id + ".yaml";
    if (state != model::ReservationState::Pending) {
      r.approvedByProduct = "pat@product";
      r.approvedBySre = "sam@sre";
      r.activatedAt = kNow - 3600;
      r.evidenceRevision = "evidence-1";
    }
    return r;
  }

  // A record moves along the state machine (pending -> active -> releasing -> released).
  void changeRecord() {
    if (mirror_.ledger.records.empty() || !config_.ledgerConfigured) return;
    auto& r =
        mirror_.ledger.records[static_cast<std::size_t>(pick(0, static_cast<int>(mirror_.ledger.records.size()) - 1))];
    switch (r.state) {
      case model::ReservationState::Pending:
        r = reservation(r.id, r.organization, r.devices, model::ReservationState::Active);
        break;
      case model::ReservationState::Active: r.state = model::ReservationState::Releasing; break;
      case model::ReservationState::Releasing:
        r.state = model::ReservationState::Released;
        r.releasedAt = kNow - 60;
        break;
      default: return;
    }
    writer_.upsert(state::Object(mirror_.ledger));
  }

  // A class created again, which no auditor has decided yet (published gates only).
  void forgetDecision() {
    if (config_.evaluatedGates) return;
    model::DeviceClass c = anyClass();
    c.gateDecided = false;
    c.gateOpen = true;
    c.gateFailureId.clear();
    c.gateReason.clear();
    c.acknowledgements.clear();
    undecided_.insert(c.name);
    put(c);
  }

  // A running VMI holding some of its namespace's devices; now and then with
  // them attached (status.attachedTo) and its launcher pod listed in
  // status.activePods, as KubeVirt and the VMI webhook leave them.
  void addVmi() {
    std::vector<const model::GpuDevice*> held;
    std::vector<std::string> holding;  // namespaces with a device holding units
    for (const auto& [k, d] : mirror_.devices) {
      if (model::holdsNodeUnits(d) && d.attachedTo.empty()) holding.push_back(d.ns);
    }
    const std::string ns = holding.empty() ? any(tenants_) : any(holding);
    for (const auto& [k, d] : mirror_.devices) {
      if (d.ns == ns && model::holdsNodeUnits(d) && d.attachedTo.empty() && chance(0.7)) held.push_back(&d);
    }
    if (held.empty()) return;
    model::VirtualMachineInstance v;
    v.ns = ns;
    v.name = "vm-" + std::to_string(serial_++);
    v.uid = "uid-" + v.name;
    v.phase = "Running";
    for (const auto* d : held) v.heldDevices.push_back(d->name);
    if (chance(0.6)) {
      // One class per launcher here: its pod asks that class's resource.
      const std::string cls = held.front()->className;
      std::int64_t units = 0;
      std::string node = held.front()->node;
      std::vector<model::GpuDevice> attached;
      for (const auto* d : held) {
        if (d->className != cls) continue;
        model::GpuDevice a = *d;
        a.attachedTo = {v.ns, v.name, v.uid};
        a.attachedAt = kNow - 30;
        units += a.count;
        if (a.node != node) node.clear();
        attached.push_back(std::move(a));
      }
      v.heldDevices.clear();
      for (const auto& a : attached) v.heldDevices.push_back(a.name);
      model::Pod launcher;
      launcher.ns = v.ns;
      launcher.name = "virt-launcher-" + v.name;
      launcher.uid = "uid-" + launcher.name;
      launcher.owners.push_back({"VirtualMachineInstance", v.name, v.uid, true, "kubevirt.io/v1"});
      launcher.containers.push_back(model::ResourceList{{mirror_.classes.at(cls).resourceName, units}});
      launcher.schedulerName = "tally-scheduler";
      if (!node.empty() && chance(0.3)) {
        launcher.nodeName = node;
        launcher.phase = model::PodPhase::Running;
      }
      v.activePods[launcher.uid] = launcher.nodeName;
      for (auto& a : attached) put(std::move(a));
      put(v);
      put(launcher);
      return;
    }
    put(v);
  }

  // The auditor: every pool's findings and gate, published into its status.
  void publishGates() {
    if (config_.evaluatedGates) return;  // no auditor: the doors evaluate the gate themselves
    for (const auto& [name, cls] : mirror_.classes) {
      if (undecided_.contains(name)) continue;
      // The PoolAuditor's decision function.
      const controller::PoolAudit audit = controller::auditOf(mirror_, cls);
      const auto& findings = audit.findings;
      model::GateState gate = audit.gate;
      model::DeviceClass published = cls;
      // Operators acknowledge a cleared failure now and then.
      const bool failing = std::any_of(findings.begin(), findings.end(),
                                       [](const model::Finding& f) { return model::failsClosed(f.code); });
      if (!gate.open && !failing && !cls.gateFailureId.empty() && chance(0.3)) {
        published.acknowledgements.push_back({cls.gateFailureId, "product", "pat@product"});
        published.acknowledgements.push_back({cls.gateFailureId, "sre", "sam@sre"});
        gate = model::evaluateGate(mirror_, published, findings);
      }
      published.gateDecided = true;
      published.gateOpen = gate.open;
      published.gateFailureId = gate.failureId;
      published.gateReason = gate.reason;
      if (!(published == cls)) put(published);
    }
  }

  Config config_;
  model::Timestamp clock_ = kNow;  // the writer's clock: moved forward to age its caches
  std::mt19937_64 rng_;
  std::set<std::string> undecided_;
  model::Cluster mirror_;
  extender::CacheWriter writer_;
  controller::VmiWebhook vmi_;
  std::vector<std::string> tenants_;
  std::set<std::string> draNodes_;  // nodes whose GPUs a DRA driver publishes
  int serial_ = 0;
};

std::string configName(const Config& c) {
  return std::string(c.refuseUnorganized ? "refuse" : "allow") + (c.evaluatedGates ? "/evaluated" : "/published") +
         (c.ledgerConfigured ? "/ledger" : "/no-ledger") + (c.organizationsWatched ? "" : "/no-organizations");
}

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

bool hasCode(const std::string& message, model::Code code) {
  return message.find("[" + std::string(model::toString(code)) + "]") != std::string::npos;
}

// A ResourceClaim's CREATE as kube-controller-manager sends it for a pod's
// template: `count` devices of the pool's DeviceClass.
std::string claimReview(const std::string& ns, std::int64_t count) {
  const std::string claim =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"ask-claim",)"
      R"("namespace":")" +
      ns + R"("},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":")" +
      std::string(kDraDeviceClass) + R"(","allocationMode":"ExactCount","count":)" + std::to_string(count) + "}}]}}}";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-4",)"
         R"("kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"},)"
         R"("resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceclaims"},)"
         R"("name":"ask-claim","namespace":")" +
         ns +
         R"(","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:resource-claim-controller"},)"
         R"("dryRun":true,"object":)" +
         claim + R"(,"oldObject":null}})";
}

// The claim door's answer to a dry-run claim of `count` devices of the DRA
// pool, on the writer's newest snapshot.
runtime::admission::AdmissionResponse askClaimDoor(World& world, const std::string& ns, std::int64_t count) {
  controller::ClaimWebhook door(world.writer().snapshots());
  auto request = runtime::admission::decodeAdmissionReview(claimReview(ns, count));
  EXPECT_TRUE(request) << request.error().message;
  return door.review(*request, std::chrono::steady_clock::now()).response;
}

// The refusal codes of an answer that are about the tenant and the gate (its
// budgets, entitlement, Organization, the pool's gate, the caches), not about
// where the units are: what a claim and a pod of the same units must share.
std::set<std::string> tenantCodes(const std::string& message) {
  std::set<std::string> out;
  for (model::Code code : {model::Code::BudgetExceeded, model::Code::GateClosed, model::Code::NotEntitled,
                           model::Code::NamespaceUnorganized, model::Code::CacheNotSynced}) {
    if (hasCode(message, code)) out.insert(std::string(model::toString(code)));
  }
  return out;
}

// The test-only switch that shows a relation can fail: the door on one side
// of the perturbed relation is asked about one unit more than the other side.
Relation perturbed = kRelations;
std::int64_t bump(Relation r) { return r == perturbed ? 1 : 0; }

// Every question of one event, on one snapshot.
void askDoors(World& world, Counts& counts, int questions) {
  auto snap = world.writer().snapshots().read();
  const model::Cluster& cluster = snap->cluster();
  // The recomputed cluster with the gate every door applies, decided from
  // scratch by the same rule (model::doorGates) in the world's configuration.
  // Perturbed, the recomputed side holds one running pod the doors' snapshot
  // never saw (one unit on the first GPU node).
  model::Cluster recomputedBase = world.mirror();
  if (perturbed == IndexVsRecompute || perturbed == ReportVsGate || perturbed == ReportVsSnapshotFree ||
      perturbed == CatalogSnapshotVsTotals) {
    for (const auto& [name, node] : recomputedBase.nodes) {
      if (node.allocatable.empty()) continue;
      model::Pod phantom;
      phantom.ns = world.tenants().front();
      phantom.name = phantom.uid = "phantom";
      phantom.nodeName = name;
      phantom.phase = model::PodPhase::Running;
      // More than the node serves: it over-commits the node for sure.
      const auto& [resource, served] = *node.allocatable.begin();
      phantom.containers.push_back(model::ResourceList{{resource, served + 1}});
      recomputedBase.pods[model::objectKey(phantom.ns, phantom.name)] = phantom;
      break;
    }
  }
  model::Cluster mirrorGated = recomputedBase;
  model::applyDoorGates(mirrorGated,
                        model::doorGates(recomputedBase, world.config().evaluatedGates ? model::GateSource::Evaluated
                                                                                       : model::GateSource::Published));
  const model::Cluster& mirror = mirrorGated;
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

  for (const auto& [name, cls] : cluster.classes) {
    if (cls.gateOpen) continue;
    const auto first = cls.gateReason.find("first: ");
    std::string why = first == std::string::npos
                          ? cls.gateReason.substr(0, 30)
                          : cls.gateReason.substr(first + 7, cls.gateReason.find(':', first + 7) - first - 7);
    ++counts.closedBy[why];
  }
  // tallyctl report on the recomputed cluster against the snapshot and the published gates.
  const model::Report report = model::buildReport(recomputedBase);
  for (const auto& pool : report.pools) {
    if (world.undecided().contains(pool.pool)) continue;  // no auditor has published: see UndecidedClosed
    const model::DeviceClass& published = cluster.classes.at(pool.pool);
    counts.check(ReportVsGate, pool.gate.open == published.gateOpen,
                 configName(world.config()) + " pool " + pool.pool + ": report gate " +
                     (pool.gate.open ? "open: " : "closed: ") + pool.gate.reason + "; published " +
                     (published.gateOpen ? "open" : "closed: " + published.gateReason));
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
      same = a.className == b.className && a.largestCount == b.largestCount && a.refusals.size() == b.refusals.size();
      for (std::size_t j = 0; same && j < a.refusals.size(); ++j) {
        // With the auditor off the writer dates a failure id by its live
        // cluster's clock, the recomputed cluster by its own: the gate's
        // message may differ in that id only.
        same = a.refusals[j].code == b.refusals[j].code &&
               (a.refusals[j].code == model::Code::GateClosed || a.refusals[j].message == b.refusals[j].message);
      }
    }
    std::string differs;
    for (std::size_t i = 0; differs.empty() && i < std::min(catalog.classes.size(), recomputedCatalog.classes.size());
         ++i) {
      model::CatalogOptions one{ns, {catalog.classes[i]}}, other{ns, {recomputedCatalog.classes[i]}};
      if (codec::encodeCatalog(one) != codec::encodeCatalog(other)) {
        differs = codec::encodeCatalog(one) + " vs " + codec::encodeCatalog(other);
      }
    }
    counts.check(CatalogSnapshotVsTotals, same, configName(world.config()) + " namespace " + ns + ": " + differs);
    const auto endpoint =
        controller::optionsResponse(*snap, perturbed == EndpointVsCatalog ? world.any(world.tenants()) : ns);
    counts.check(EndpointVsCatalog, endpoint.status == 200 && endpoint.body == codec::encodeCatalog(catalog) + "\n",
                 "namespace " + ns + ": GET /options " + std::to_string(endpoint.status));

    for (const auto& option : catalog.classes) {
      const model::DeviceClass& cls = cluster.classes.at(option.className);
      const std::int64_t n = world.pick(1, static_cast<int>(std::max<std::int64_t>(1, cls.maxCount)) + 1);
      ++counts.cases;
      const std::string what = "class " + cls.name + " x" + std::to_string(n) + " in " + ns;

      auto request = runtime::admission::decodeAdmissionReview(deviceReview(ns, cls.name, n + bump(CatalogVsWebhook)));
      ASSERT_TRUE(request) << request.error().message;
      const auto answer = controller::reviewGpuDevice(*snap, *request, webhookOptions).response;
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
        // The DeviceBinder's decision function on the device as stored.
        const auto& stored = withDevice->cluster().devices.at(model::objectKey(ns, "ask"));
        const model::Placement placed = controller::binderPlacement(withDevice->cluster(), ahead, stored, stored);
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
        const auto vmiAnswer = world.vmi().review(*vmiRequest).response;
        if (vmiAnswer.allowed) ++counts.vmiAdmitted;
        counts.check(WebhookVsVmi, answer.allowed == vmiAnswer.allowed,
                     what + ": webhook " + (answer.allowed ? "admits" : "refuses: " + answer.message) + "; VMI " +
                         (vmiAnswer.allowed ? "admits" : "refuses: " + vmiAnswer.message));
      }

      // A DRA class's gate is kept at the claim door (its GPUDevice orders
      // are refused NotPermitted first).
      const auto gateAnswer = cls.dra ? askClaimDoor(world, ns, n) : answer;
      const bool gateRefusal = !gateAnswer.allowed && hasCode(gateAnswer.message, model::Code::GateClosed);
      // Perturbed: compared with the gate of the next class.
      auto next = std::next(cluster.classes.find(cls.name));
      const model::DeviceClass& gateOf = perturbed == GateVsDoors && next != cluster.classes.end() ? next->second : cls;
      counts.check(GateVsDoors, gateRefusal == !gateOf.gateOpen,
                   what + ": published gate " + (cls.gateOpen ? "open" : "closed") + ", door " +
                       (gateAnswer.allowed ? "admits" : gateAnswer.message));
      if (world.undecided().contains(cls.name) != (perturbed == UndecidedClosed)) {
        counts.check(UndecidedClosed, gateRefusal && gateAnswer.message.find("is not audited yet") != std::string::npos,
                     what + ": undecided class, door " + (gateAnswer.allowed ? "admits" : gateAnswer.message));
      }

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
        return route ? controller::reviewGpuPodRoute(*snap, *req, podOptions).response
                     : controller::reviewGpuPod(*snap, *req, podOptions).response;
      };
      const auto unplaced = review("", "tally-scheduler", false);
      // A DRA class: the claim door on a claim of the same units decides the
      // tenant's side as the pod door does (where the units are, the claim
      // door alone checks: a pod's node is the extender's).
      if (cls.dra) {
        const auto claimAnswer = askClaimDoor(world, ns, n + bump(ClaimVsPodDoor));
        const auto claimCodes = tenantCodes(claimAnswer.allowed ? "" : claimAnswer.message);
        const auto podCodes = tenantCodes(unplaced.allowed ? "" : unplaced.message);
        counts.check(ClaimVsPodDoor, claimCodes == podCodes,
                     what + ": claim door " + (claimAnswer.allowed ? "admits" : "refuses: " + claimAnswer.message) +
                         "; pod door " + (unplaced.allowed ? "admits" : "refuses: " + unplaced.message));
      }
      // Under the refuse policy, no door lets a namespace under no Organization order.
      if (world.config().refuseUnorganized &&
          model::unattributedNamespace(mirror, ns).has_value() != (perturbed == UnorganizedRefused)) {
        const bool everyDoor = !answer.allowed && hasCode(answer.message, model::Code::NamespaceUnorganized) &&
                               option.largestCount == 0 && !unplaced.allowed && passed.empty();
        counts.check(UnorganizedRefused, everyDoor,
                     what + ": webhook " + (answer.allowed ? "admits" : answer.message) + ", catalogue largest " +
                         std::to_string(option.largestCount) + ", pod door " +
                         (unplaced.allowed ? "admits" : unplaced.message) + ", extender passes " +
                         std::to_string(passed.size()) + " node(s)");
      }
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
      // A pod naming a claim of the namespace (waiting, allocated, being
      // deleted, or one the world never made): the extender, which counts
      // the claim from its snapshot's sums, and the model on the recomputed
      // cluster send it to the same nodes.
      if (cls.dra) {
        model::Pod claimPod;
        claimPod.ns = ns;
        claimPod.name = "ask-claim-pod";
        claimPod.uid = "uid-ask-claim-pod";
        claimPod.hasResourceClaims = true;
        claimPod.containers.push_back(model::ResourceList{{std::string(model::kClaimPodMarker), 1}});
        std::vector<std::string> names = {"never-made"};
        for (const auto& [key, claim] : mirror.resourceClaims) {
          if (claim.ns == ns) names.push_back(claim.name);
        }
        const std::string& claimName = names[static_cast<std::size_t>(n) % names.size()];
        claimPod.claims.push_back(model::PodClaim{"gpu", claimName, ""});
        extender::wire::ExtenderArgs claimArgs;
        claimArgs.pod = claimPod;
        // Perturbed: the extender is asked about one more unit of the class.
        if (bump(ClaimPodExtenderVsModel)) claimArgs.pod.containers.front().set(cls.resourceName, 1);
        claimArgs.nodeNames = args.nodeNames;
        const extender::wire::FilterResult claimFiltered = extender::filterNodes(*snap, claimArgs);
        std::set<std::string_view> claimPassed(claimFiltered.passed.begin(), claimFiltered.passed.end());
        const model::PodDemand claimDemand = model::podDemand(mirror, totals, claimPod);
        for (const auto& [name, node] : mirror.nodes) {
          const model::NodeVerdict v = model::filterNode(mirror, totals, claimDemand, node);
          counts.check(ClaimPodExtenderVsModel, (v.verdict == model::Verdict::Fits) == claimPassed.contains(name),
                       what + " pod naming resourceclaim " + ns + "/" + claimName + " on " + name + ": model " +
                           (v.verdict == model::Verdict::Fits ? "fits" : (v.reason ? v.reason->message : "refuses")) +
                           ", extender " + (claimPassed.contains(name) ? "passes" : "fails"));
        }
      }
      for (const auto& [name, node] : mirror.nodes) {
        const model::NodeVerdict v = model::filterNode(mirror, totals, demand, node);
        if (v.verdict == model::Verdict::Fits) ++counts.podFits;
        const bool agree = (v.verdict == model::Verdict::Fits) == passed.contains(name) &&
                           (v.verdict == model::Verdict::Unresolvable) == unresolvable.contains(name);
        counts.check(ExtenderVsModel, agree,
                     what + " pod on " + name + ": model " +
                         (v.verdict == model::Verdict::Fits ? "fits" : (v.reason ? v.reason->message : "refuses")) +
                         (v.verdict == model::Verdict::Unresolvable ? " (unresolvable)" : "") + ", extender " +
                         (passed.contains(name)         ? "passes"
                          : unresolvable.contains(name) ? "unresolvable"
                                                        : "fails"));
      }
    }
  }
}

// A launcher pod's CREATE as virt-controller sends it: no uid yet, owned by its VMI.
std::string launcherReview(const std::string& ns, const std::string& name, const model::VirtualMachineInstance& vmi,
                           const std::string& resource, std::int64_t units) {
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" + ns +
                          R"(","ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",)"
                          R"("name":")" +
                          vmi.name + R"(","uid":")" + vmi.uid +
                          R"(","controller":true}]},)"
                          R"("spec":{"schedulerName":"tally-scheduler","containers":[{"name":"compute",)"
                          R"("resources":{"requests":{")" +
                          resource + R"(":")" + std::to_string(units) + R"("}}}]}})";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-4",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},)"
         R"("name":")" +
         name + R"(","namespace":")" + ns +
         R"(","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kubevirt:kubevirt-controller"},)"
         R"("dryRun":true,"object":)" +
         pod + R"(,"oldObject":null}})";
}

std::string addonsJson(const std::vector<model::AddonAssignment>& addons) {
  std::string out = "[";
  for (const auto& a : addons) {
    if (out.size() > 1) out += ',';
    out += R"({\"addonId\":\")" + a.addonId + R"(\",\"quantity\":)" + std::to_string(a.quantity) + "}";
  }
  return out + "]";
}

std::string organizationReview(const model::Organization& before, const model::Organization& after) {
  auto object = [](const model::Organization& o) {
    return R"({"apiVersion":"kube-dc.com/v1","kind":"Organization","metadata":{"name":")" + o.name +
           R"(","namespace":")" + o.ns + R"(","annotations":{"billing.kube-dc.com/addons":")" + addonsJson(o.addons) +
           R"("}},"spec":{}})";
  };
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-5",)"
         R"("kind":{"group":"kube-dc.com","version":"v1","kind":"Organization"},)"
         R"("resource":{"group":"kube-dc.com","version":"v1","resource":"organizations"},)"
         R"("name":")" +
         after.name + R"(","namespace":")" + after.ns +
         R"(","operation":"UPDATE","userInfo":{"username":"ops@platform"},"dryRun":true,"object":)" + object(after) +
         R"(,"oldObject":)" + object(before) + "}}";
}

// The doors asked once per event, beside the per-class questions.
void askOtherDoors(World& world, Counts& counts) {
  auto snap = world.writer().snapshots().read();
  const model::Cluster& mirror = world.mirror();
  const model::TotalsCapacityView totals(mirror, model::computeUsage(mirror));

  // Each VMI's launcher still to be placed: the launcher door's pin, and the
  // extender on the launcher the VMI lists in activePods.
  for (const auto& [key, vmi] : mirror.vmis) {
    for (const auto& [podUid, podNode] : vmi.activePods) {
      const model::Pod* launcher = nullptr;
      for (const auto& [k, p] : mirror.pods) {
        if (p.ns == vmi.ns && p.uid == podUid) launcher = &p;
      }
      if (!launcher || !launcher->nodeName.empty() || launcher->containers.empty()) continue;
      const auto& [resource, units] = *launcher->containers.front().begin();
      auto req =
          runtime::admission::decodeAdmissionReview(launcherReview(vmi.ns, launcher->name, vmi, resource, units));
      ASSERT_TRUE(req) << req.error().message;
      const auto answer = controller::reviewLauncherPod(*snap, *req, {}).response;
      std::optional<std::string> pin;
      if (answer.allowed && !answer.patch.empty()) {
        std::string body;
        for (const auto& op : answer.patch.operations()) body += op.valueJson;
        for (const auto& [name, node] : mirror.nodes) {
          if (body.find('"' + name + '"') != std::string::npos) pin = name;
        }
      }
      if (perturbed == LauncherPinVsExtender && pin) pin = *pin + "-elsewhere";
      extender::wire::ExtenderArgs args;
      args.pod = *launcher;
      for (const auto& [name, node] : snap->cluster().nodes) args.nodeNames.push_back(name);
      const auto filtered = extender::filterNodes(*snap, args);
      bool agree = answer.allowed ? true : filtered.passed.empty();
      if (answer.allowed && pin) {
        for (const auto& n : filtered.passed) agree = agree && n == *pin;
      }
      std::string passedNames;
      for (const auto& n : filtered.passed) passedNames += std::string(n) + " ";
      counts.check(LauncherPinVsExtender, agree,
                   "launcher " + launcher->name + ": door " +
                       (answer.allowed ? "pins to " + pin.value_or("(none)") : "refuses: " + answer.message) +
                       ", extender passes " + passedNames);
    }
  }

  // The extender's bind verb (its assume step, before any POST) on one
  // pending GPU pod and one node: it holds the units exactly where the filter
  // passes the pod, and refuses elsewhere (NoLongerFits). The placement is
  // forgotten again, so the world is unchanged.
  if (snap->ready()) {
    std::vector<const model::Pod*> pending;
    for (const auto& [key, pod] : mirror.pods) {
      if (pod.nodeName.empty() && !pod.containers.empty() && !model::isTerminal(pod)) pending.push_back(&pod);
    }
    std::vector<std::string> nodeNames;
    for (const auto& [name, node] : snap->cluster().nodes) nodeNames.push_back(name);
    if (!pending.empty() && !nodeNames.empty()) {
      const model::Pod pod = *pending[static_cast<std::size_t>(world.pick(0, static_cast<int>(pending.size()) - 1))];
      const std::string node =
          nodeNames[static_cast<std::size_t>(world.pick(0, static_cast<int>(nodeNames.size()) - 1))];
      extender::wire::ExtenderArgs args;
      args.pod = pod;
      args.nodeNames.push_back(node);
      const auto filtered = extender::filterNodes(*snap, args);
      const bool passes = !filtered.passed.empty();
      auto outcome = world.writer().assume(pod.ns, pod.name, pod.uid, node);
      world.writer().flush();
      const auto result = outcome.wait_for(std::chrono::seconds(0)) == std::future_status::ready
                              ? outcome.get()
                              : extender::AssumeOutcome::NotPublished;
      world.writer().forget(pod.uid);
      world.writer().flush();
      bool recorded = result == extender::AssumeOutcome::Recorded;
      if (perturbed == BindVsFilter) recorded = !recorded;
      counts.check(
          BindVsFilter, passes == recorded,
          "pod " + pod.ns + "/" + pod.name + " on " + node + ": filter " +
              (passes ? "passes"
                      : "refuses: " + (!filtered.failed.empty()         ? std::string(filtered.failed[0].second)
                                       : !filtered.unresolvable.empty() ? std::string(filtered.unresolvable[0].second)
                                                                        : filtered.error)) +
              ", bind " +
              (recorded ? "records it" : "refuses (outcome " + std::to_string(static_cast<int>(result)) + ")"));
    }
  }

  // The Organization webhook and tallyctl plan on one add-on change.
  if (!mirror.organizations.empty() && mirror.plans) {
    auto org = mirror.organizations.begin();
    std::advance(org, world.pick(0, static_cast<int>(mirror.organizations.size()) - 1));
    auto addon = mirror.plans->addons.begin();
    std::advance(addon, world.pick(0, static_cast<int>(mirror.plans->addons.size()) - 1));
    model::Organization after = org->second;
    std::int64_t quantity = 0;
    auto it = std::find_if(after.addons.begin(), after.addons.end(),
                           [&](const model::AddonAssignment& a) { return a.addonId == addon->first; });
    if (it != after.addons.end()) quantity = it->quantity;
    const std::int64_t wanted = world.chance(0.6) || quantity == 0 ? quantity + 1 : quantity - 1;
    if (it != after.addons.end()) {
      it->quantity = wanted;
    } else {
      after.addons.push_back({addon->first, wanted});
    }
    auto req = runtime::admission::decodeAdmissionReview(organizationReview(org->second, after));
    ASSERT_TRUE(req) << req.error().message;
    const auto answer = controller::reviewOrganization(mirror, totals, *req, {}).response;
    const model::PlanResult plan =
        model::plan(mirror, model::AddonQuantityChange{after.name, addon->first, wanted + bump(OrganizationVsPlan)});
    counts.check(OrganizationVsPlan, answer.allowed == plan.decision.allowed(),
                 "organization " + after.name + " " + addon->first + " " + std::to_string(quantity) + " -> " +
                     std::to_string(wanted) + ": webhook " + (answer.allowed ? "admits" : answer.message) + ", plan " +
                     (plan.decision.allowed() ? "allows" : plan.decision.summary()));
  }

  // Caches not confirmed for longer than the staleness bound: with no auditor,
  // the doors' own evaluation closes every pool (StaleCapacity).
  if (world.config().evaluatedGates && world.chance(0.1)) {
    if (perturbed != StaleRefused) world.age(model::AuditOptions{}.staleAfterSeconds + 60);
    auto stale = world.writer().snapshots().read();
    const std::string ns = world.any(world.tenants());
    for (const auto& [name, cls] : stale->cluster().classes) {
      auto device = runtime::admission::decodeAdmissionReview(deviceReview(ns, name, 1));
      ASSERT_TRUE(device);
      const auto answer =
          cls.dra ? askClaimDoor(world, ns, 1) : controller::reviewGpuDevice(*stale, *device, {}).response;
      counts.check(StaleRefused,
                   !answer.allowed && hasCode(answer.message, model::Code::GateClosed) &&
                       cls.gateReason.find("StaleCapacity") != std::string::npos,
                   "class " + name + " in " + ns + " with stale caches: " +
                       (answer.allowed ? "admitted" : answer.message) + "; gate: " + cls.gateReason);
    }
    world.age(0);
  }

  // A cache that has not synced (a watch restarting): every door refuses.
  if (world.chance(0.1) || perturbed == UnsyncedRefused) {
    const bool unsync = perturbed != UnsyncedRefused;
    const model::Kind kind = unsync ? world.unsync() : model::Kind::Node;
    auto unsynced = world.writer().snapshots().read();
    const std::string ns = world.any(world.tenants());
    const auto& cls = snap->cluster().classes.begin()->second;
    auto device = runtime::admission::decodeAdmissionReview(deviceReview(ns, cls.name, 1));
    auto vmiReq = runtime::admission::decodeAdmissionReview(vmiReview(ns, cls.name, 1));
    auto podReq = runtime::admission::decodeAdmissionReview(podReview(ns, cls.resourceName, 1, "", "tally-scheduler"));
    ASSERT_TRUE(device && vmiReq && podReq);
    const auto deviceAnswer = controller::reviewGpuDevice(*unsynced, *device, {}).response;
    const auto vmiAnswer = world.vmi().review(*vmiReq).response;
    const auto podAnswer = controller::reviewGpuPod(*unsynced, *podReq, {}).response;
    extender::wire::ExtenderArgs args;
    args.pod.ns = ns;
    args.pod.name = "ask-pod";
    args.pod.uid = "uid-ask-pod";
    args.pod.containers.push_back(model::ResourceList{{cls.resourceName, 1}});
    for (const auto& [name, node] : unsynced->cluster().nodes) args.nodeNames.push_back(name);
    const auto filtered = extender::filterNodes(*unsynced, args);
    const auto options = controller::optionsResponse(*unsynced, ns);
    const bool binderWaits = !unsynced->ready();  // DeviceBinder::reconcile requeues on an unready snapshot
    // The claim door, when the world sells a DRA pool.
    bool claimRefused = true;
    if (unsynced->cluster().classes.contains("r100")) claimRefused = !askClaimDoor(world, ns, 1).allowed;
    counts.check(
        UnsyncedRefused,
        !deviceAnswer.allowed && !vmiAnswer.allowed && !podAnswer.allowed && filtered.passed.empty() &&
            options.status != 200 && binderWaits && claimRefused,
        std::string("cache ") + (unsync ? std::string(model::toString(kind)) : "(none)") + " unsynced: GPUDevice " +
            (deviceAnswer.allowed ? "admits" : "refuses") + ", VMI " + (vmiAnswer.allowed ? "admits" : "refuses") +
            ", pod " + (podAnswer.allowed ? "admits" : "refuses") + ", extender passes " +
            std::to_string(filtered.passed.size()) + ", /options " + std::to_string(options.status) + ", binder " +
            (binderWaits ? "waits" : "decides") + ", claim door " + (claimRefused ? "refuses" : "admits"));
    if (unsync) world.resync(kind);
  }
}

// Sanitizer builds (make test-sanitizers) run twenty times slower: fewer cases
// by default. There the test looks for memory and undefined-behaviour errors
// on the doors' paths; that every relation is asked (some questions are rare:
// a launcher still to be placed comes up a few dozen times in 10,000 cases)
// and that each perturbation is caught is asserted from the full count on,
// which the test command's main build runs.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::int64_t kDefaultCases = 2000;
constexpr std::int64_t kDefaultPerturbedCases = 100;
#else
constexpr std::int64_t kDefaultCases = 10000;
constexpr std::int64_t kDefaultPerturbedCases = 1500;
#endif
constexpr std::int64_t kFullCoverageCases = 10000;
constexpr std::int64_t kFullCoveragePerturbedCases = 1500;

TEST(EveryDoorAgrees, RandomClustersAndEvents) {
  const std::int64_t target = envOr("TALLY_DIFFERENTIAL_CASES", kDefaultCases);
  const std::uint64_t seed0 = static_cast<std::uint64_t>(envOr("TALLY_DIFFERENTIAL_SEED", 17));
  const int eventsPerCluster = 30;
  Counts counts;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t seed = seed0; counts.cases < target; ++seed) {
    World world(seed);
    ++counts.clusters;
    ++counts.configurations[configName(world.config())];
    askDoors(world, counts, 1);
    for (int e = 0; e < eventsPerCluster && counts.cases < target; ++e) {
      world.event();
      ++counts.events;
      askDoors(world, counts, 1);
      askOtherDoors(world, counts);
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
    if (target >= kFullCoverageCases) {
      EXPECT_GT(counts.checked[r], 0) << kRelationNames[r] << " was never checked";
    } else if (counts.checked[r] == 0) {
      std::cout << "  (" << kRelationNames[r] << " not asked in " << target << " cases; asserted from "
                << kFullCoverageCases << " on)\n";
    }
  }
  std::cout << "  configurations:";
  for (const auto& [name, n] : counts.configurations) std::cout << ' ' << name << '=' << n;
  std::cout << '\n';
  EXPECT_EQ(counts.configurations.size(), 12u) << "every configuration runs";
  std::cout << "  closed gates by first finding:";
  for (const auto& [why, n] : counts.closedBy) std::cout << " [" << why << "]=" << n;
  std::cout << '\n';
  std::cout << "  refusal reasons:";
  for (const auto& [code, n] : counts.refusalCodes) std::cout << ' ' << code << '=' << n;
  std::cout << '\n';
  for (const auto& e : counts.examples) std::cout << "  e.g. " << e << '\n';
  EXPECT_EQ(total, 0) << "doors disagree (see the examples above)";
  // Both answers occur, or the comparison proves little.
  std::cout << "  VMI plans admitted: " << counts.vmiAdmitted << ", pod fits on a node: " << counts.podFits << '\n';
  // Most questions meet a closed door (the worlds run without a ledger, with
  // undecided classes, unorganized tenants and over-sold pools); a few in a
  // hundred admitted still proves both answers are compared.
  EXPECT_GT(counts.admitted, counts.cases / 50);
  EXPECT_GT(counts.refused, counts.cases / 10);
  EXPECT_GT(counts.vmiAdmitted, 0);
  EXPECT_GT(counts.podFits, 0);
}

// Each relation the switch can perturb is shown to fail when one of its doors
// answers another question: a relation that cannot fail proves nothing.
TEST(EveryDoorAgrees, EachRelationCatchesAPerturbedDoor) {
  const std::int64_t target = envOr("TALLY_DIFFERENTIAL_PERTURBED_CASES", kDefaultPerturbedCases);
  for (int i = 0; i < kRelations; ++i) {
    const Relation r = static_cast<Relation>(i);
    perturbed = r;
    Counts counts;
    // Launchers still to place are rare: that relation is asked longer.
    const std::int64_t cases = r == LauncherPinVsExtender ? 8 * target : target;
    for (std::uint64_t seed = 101; counts.cases < cases; ++seed) {
      World world(seed);
      askDoors(world, counts, 1);
      for (int e = 0; e < 30 && counts.cases < cases; ++e) {
        world.event();
        askDoors(world, counts, 1);
        askOtherDoors(world, counts);
      }
    }
    perturbed = kRelations;
    std::cout << "  perturbed " << kRelationNames[r] << ": " << counts.disagreed[r] << " of " << counts.checked[r]
              << " disagree\n";
    if (target >= kFullCoveragePerturbedCases) {
      EXPECT_GT(counts.disagreed[r], 0) << kRelationNames[r] << " did not notice its perturbed door";
    }
  }
}

}  // namespace
}  // namespace tally
