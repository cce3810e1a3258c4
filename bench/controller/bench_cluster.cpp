#include "bench_cluster.hpp"

#include <fmt/format.h>

#include "tally/model/resources.hpp"

namespace tally::bench {
namespace {

constexpr model::Timestamp kNow = 1'800'000'000;

std::string organization(int o) { return fmt::format("org-{:02}", o); }
// Every organization has two tenants under it; orders come from the first.
std::string vmTenant(int o) { return organization(o) + "-vms"; }
std::string trainTenant(int o) { return organization(o) + "-train"; }

void addNamespace(model::Cluster& c, const std::string& name, const std::string& parent) {
  model::Namespace n;
  n.name = name;
  n.tree[name] = 0;
  if (!parent.empty()) n.tree[parent] = 1;
  c.namespaces[name] = std::move(n);
}

void addOrganization(model::Cluster& c, int o) {
  const std::string org = organization(o);
  addNamespace(c, org, "");
  addNamespace(c, vmTenant(o), org);
  addNamespace(c, trainTenant(o), org);
  model::Organization record;
  record.ns = org;
  record.name = org;
  c.organizations[model::objectKey(org, org)] = std::move(record);
  model::HierarchicalResourceQuota q;
  q.ns = org;
  q.name = std::string(model::kOrgQuotaName);
  const std::int64_t hard = o == kExhaustedOrganization ? 0 : 1'000'000;
  q.hard.set(model::quotaKey(kH200), hard);
  q.statusHard.set(model::quotaKey(kH200), hard);
  c.hrqs[model::objectKey(q.ns, q.name)] = std::move(q);
}

model::GpuDevice heldDevice(const std::string& ns, const std::string& name, std::int64_t count,
                            model::DevicePhase phase, const std::string& node) {
  model::GpuDevice d;
  d.ns = ns;
  d.name = name;
  d.uid = "uid-" + name;
  d.className = std::string(kClassName);
  d.count = count;
  d.phase = phase;
  d.node = node;
  d.created = kNow - 86'400;
  return d;
}

model::Pod runningPod(const std::string& ns, const std::string& name, std::int64_t units, const std::string& node) {
  model::Pod p;
  p.ns = ns;
  p.name = name;
  p.uid = "uid-" + name;
  p.nodeName = node;
  p.phase = model::PodPhase::Running;
  model::ResourceList requests;
  requests.set("cpu", 4);
  requests.set(kH200, units);
  p.containers.push_back(std::move(requests));
  return p;
}

// A running VM on `node`: its launcher pod asks for the devices' units, which
// its Attached device covers.
void addRunningVm(model::Cluster& c, const std::string& ns, const std::string& node, std::int64_t units) {
  model::Pod launcher = runningPod(ns, "virt-launcher-vm-" + node, units, node);
  model::VirtualMachineInstance vmi;
  vmi.ns = ns;
  vmi.name = "vm-" + node;
  vmi.uid = "uid-vm-" + node;
  vmi.phase = "Running";
  vmi.activePods[launcher.uid] = node;
  model::GpuDevice d = heldDevice(ns, "gpu-vm-" + node, units, model::DevicePhase::Attached, node);
  d.attachedTo = model::ObjectRef{vmi.ns, vmi.name, vmi.uid};
  vmi.heldDevices.push_back(d.name);
  c.devices[model::objectKey(d.ns, d.name)] = std::move(d);
  c.pods[model::objectKey(launcher.ns, launcher.name)] = std::move(launcher);
  c.vmis[model::objectKey(vmi.ns, vmi.name)] = std::move(vmi);
}

}  // namespace

std::string nodeName(std::size_t i) { return fmt::format("n-{:05}", i); }

model::Cluster benchCluster(std::size_t nodes) {
  model::Cluster c;
  c.now = kNow;
  c.markAllSynced();
  c.plans = model::BillingPlans{};
  model::DeviceClass cls;
  cls.name = std::string(kClassName);
  cls.workload = model::Workload::Vm;
  cls.allocation = model::Allocation::Passthrough;
  cls.resourceName = std::string(kH200);
  cls.nodeMode = model::NodeMode::VmPassthrough;
  cls.memoryMiB = 144384;
  cls.maxCount = kUnitsPerNode;
  c.classes[cls.name] = cls;
  for (int o = 0; o < kOrganizations; ++o) addOrganization(c, o);

  for (std::size_t i = 0; i < nodes; ++i) {
    model::Node n;
    n.name = nodeName(i);
    n.ready = true;
    n.activeMode = n.expectedMode = model::NodeMode::VmPassthrough;
    n.allocatable.set(kH200, kUnitsPerNode);
    c.nodes[n.name] = n;
    // Tenants of the organizations with a budget hold what is in use.
    const int o = static_cast<int>(i % (kOrganizations - 1));
    switch (i % 10) {
      case 0: {
        auto d = heldDevice(trainTenant(o), "held-" + n.name, kUnitsPerNode, model::DevicePhase::Bound, n.name);
        c.devices[model::objectKey(d.ns, d.name)] = std::move(d);
        break;
      }
      case 1:
      case 2:
      case 3: addRunningVm(c, vmTenant(o), n.name, 2); break;
      case 4:
      case 5: {
        auto d = heldDevice(vmTenant(o), "held-" + n.name, 4, model::DevicePhase::Bound, n.name);
        c.devices[model::objectKey(d.ns, d.name)] = std::move(d);
        break;
      }
      case 6: {
        auto p = runningPod(trainTenant(o), "train-" + n.name, 3, n.name);
        c.pods[model::objectKey(p.ns, p.name)] = std::move(p);
        break;
      }
      default: break;
    }
  }
  return c;
}

std::vector<Order> benchOrders(std::size_t placeable) {
  std::vector<Order> orders;
  std::size_t within = 0, serial = 0;
  while (within < placeable) {
    // One order in 20 comes from the exhausted organization.
    const bool exhausted = serial % 20 == 19;
    const int o = exhausted ? kExhaustedOrganization : static_cast<int>(within % (kOrganizations - 1));
    Order order;
    order.withinBudget = !exhausted;
    model::GpuDevice& d = order.device;
    d.ns = vmTenant(o);
    d.name = fmt::format("order-{:05}", serial);
    d.uid = "uid-" + d.name;
    d.className = std::string(kClassName);
    d.count = 1 + static_cast<std::int64_t>(serial % 4);
    d.phase = model::DevicePhase::Pending;
    d.created = kNow + static_cast<model::Timestamp>(serial);
    orders.push_back(std::move(order));
    ++serial;
    if (!exhausted) ++within;
  }
  return orders;
}

std::string createReview(const model::GpuDevice& order, std::size_t serial) {
  return fmt::format(
      R"({{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"review-{}",)"
      R"("kind":{{"group":"gpu.tally.dev","version":"v1alpha1","kind":"GPUDevice"}},)"
      R"("resource":{{"group":"gpu.tally.dev","version":"v1alpha1","resource":"gpudevices"}},)"
      R"("requestKind":{{"group":"gpu.tally.dev","version":"v1alpha1","kind":"GPUDevice"}},)"
      R"("requestResource":{{"group":"gpu.tally.dev","version":"v1alpha1","resource":"gpudevices"}},)"
      R"("name":"{}","namespace":"{}","operation":"CREATE",)"
      R"("userInfo":{{"username":"system:serviceaccount:{}:default","uid":"u-{}","groups":["system:serviceaccounts","system:authenticated"]}},)"
      R"("object":{{"apiVersion":"gpu.tally.dev/v1alpha1","kind":"GPUDevice","metadata":{{"name":"{}","namespace":"{}",)"
      R"("uid":"{}","creationTimestamp":"2027-01-15T08:00:00Z"}},"spec":{{"class":"{}","count":{}}}}},)"
      R"("oldObject":null,"dryRun":false,)"
      R"("options":{{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions","fieldManager":"kubectl-client-side-apply"}}}}}})",
      serial, order.name, order.ns, order.ns, serial, order.name, order.ns, order.uid, order.className, order.count);
}

model::Pod rawPodFor(const model::GpuDevice& order) {
  model::Pod p;
  p.ns = order.ns;
  p.name = "raw-" + order.name;
  p.uid = "uid-raw-" + order.name;
  p.phase = model::PodPhase::Pending;
  model::ResourceList requests;
  requests.set("cpu", 4);
  requests.set(kH200, order.count);
  p.containers.push_back(std::move(requests));
  return p;
}

}  // namespace tally::bench
