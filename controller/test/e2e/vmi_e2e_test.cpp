// The VM door of the real tally-controller binary, two replicas, against a
// real kube-apiserver calling its VMI mutating and GPUDevice validating
// webhooks over HTTPS with the injected caBundle; kwok nodes. KubeVirt cannot
// run here: the test plays its part — it creates the VMI, and for an admitted
// one the launcher pod as virt-controller would (resources from gpus[], owner
// reference, labels), then writes status.activePods and status.phase.
//
// (a) 20 VMIs racing for one held device, 10 times: exactly one attaches, the
// others are refused naming the device and its holder; (b) a dry run and a
// refused VMI leave no GPUDevice, no attachment; (c) reinvocation: called
// again for one VMI (another mutator changed it), the webhook writes nothing
// more and answers the same; (d) a vGPU node with one unhealthy parent serves
// a set from the other parent's slots, and the binder keeps it; (e) the
// admitted VMI asks for exactly N GPUs (gpus[] only, no resources key); (g) a
// set no single node can hold is refused at admission; (h) a held device
// with no room beside it for its set moves with the set to a node that holds
// it; (i) a VMI refused by a
// later admission stage: its attachment and template devices are gone within
// the bound; (j) a deleted VMI: template devices deleted, held devices
// detached and still Bound; (k) the leader killed during (a): still exactly
// one attach, and the new leader places and reconciles.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <simdjson.h>

#include "harness.hpp"
#include "tally/controller/vmi_webhook.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kValidating = "tally-vmi-e2e-devices";
constexpr const char* kMutating = "tally-vmi-e2e-vmis";
constexpr const char* kVgpu = "nvidia.com/A100-10C";
constexpr int kAttachTimeoutSeconds = 6;

Replica* replicas[2] = {nullptr, nullptr};

// No pool auditor: its gates are audit_e2e_test's; the vGPU pool here has an
// unhealthy parent on purpose, which the audit reports (DegradedHealth) and
// which would close that pool's gate.
const std::vector<std::string> kReplicaArgs = {
    std::string("--mutating-webhook-configurations=") + kMutating, "--enable-pool-auditor=false",
    "--vmi-attach-timeout=" + std::to_string(kAttachTimeoutSeconds) + "s", "--binder-retry-interval=1s",
    // The test cluster's kube-scheduler calls tally-extender from its default
    // profile (e2e/suite/scheduler-config.yaml).
    "--gpu-schedulers=default-scheduler"};

Replica& leader() {
  const std::string holder = leaseHolder();
  for (Replica* r : replicas) {
    if (r && r->identity == holder) return *r;
  }
  return *replicas[0];
}

// The VM door and the launcher pod webhook (pods of vm and raw).
std::string mutatingConfiguration(std::uint16_t port) {
  return shippedWebhooks(kMutating, port, {{"vmis"}, {"launcher-pods", {"vm", "raw"}}});
}

// The GPUDevice webhook and the raw GPU pod webhook (pods of vm and raw).
std::string validatingConfiguration(std::uint16_t port) {
  return shippedWebhooks(kValidating, port, {{"gpudevices"}, {"gpu-pods", {"vm", "raw"}}});
}

// Both replicas behind one address (harness.hpp's ReplicaService): every
// webhook names it from the start; when a replica dies no URL changes.
ReplicaService service;

pid_t extenderPid = -1;

const Resource& vmis(const std::string& ns) {
  static std::map<std::string, Resource> byNs;
  static std::mutex mu;
  std::lock_guard lock(mu);
  auto it = byNs.find(ns);
  if (it == byNs.end()) {
    it = byNs.emplace(ns, Resource::of("kubevirt.io", "v1", "virtualmachineinstances", ns)).first;
  }
  return it->second;
}

// A VMI naming held devices and templates ("[{\"class\":\"h200\",\"count\":1}]").
std::string vmiJson(const std::string& ns, const std::string& name, const std::vector<std::string>& held,
                    const std::string& templates = "", const std::string& labels = "") {
  std::string annotations;
  if (!held.empty()) {
    std::string list;
    for (const auto& h : held) list += (list.empty() ? "" : ",") + h;
    annotations += "\"gpu.tally.dev/devices\":\"" + list + "\"";
  }
  if (!templates.empty()) {
    std::string escaped;
    for (char c : templates) {
      if (c == '"') escaped += '\\';
      escaped += c;
    }
    annotations +=
        std::string(annotations.empty() ? "" : ",") + "\"gpu.tally.dev/device-templates\":\"" + escaped + "\"";
  }
  return "{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{\"name\":\"" + name +
         "\",\"namespace\":\"" + ns + "\",\"annotations\":{" + annotations + "}" +
         (labels.empty() ? "" : ",\"labels\":{" + labels + "}") +
         "},\"spec\":{\"domain\":{\"devices\":{\"disks\":[]},\"resources\":{\"requests\":{\"memory\":\"1Gi\"}}}}}";
}

struct Device {
  std::string phase, node, vmi, uid, token;
  bool exists = false;
};

Device deviceOf(const std::string& ns, const std::string& name) {
  int rc = 0;
  std::string out = kubectl("get gpudevice -n " + ns + " " + name +
                                " -o 'jsonpath={.status.phase}/{.status.node}/{.status.attachedTo.name}/"
                                "{.status.attachedTo.uid}/{.status.attachedTo.token}'",
                            &rc);
  Device d;
  if (rc != 0) return d;
  d.exists = true;
  std::vector<std::string> parts;
  std::stringstream ss(out);
  for (std::string part; std::getline(ss, part, '/');) parts.push_back(part);
  parts.resize(5);
  d.phase = parts[0];
  d.node = parts[1];
  d.vmi = parts[2];
  d.uid = parts[3];
  d.token = parts[4];
  return d;
}

std::vector<std::string> deviceNames(const std::string& ns) {
  std::istringstream in(
      kubectl("get gpudevices -n " + ns + " -o 'jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}'"));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string jsonpathOf(const std::string& kind, const std::string& ns, const std::string& name,
                       const std::string& path) {
  return kubectl("get " + kind + " -n " + ns + " " + name + " -o 'jsonpath=" + path + "'");
}

void bound(const std::string& ns, const std::string& name, int count, const std::string& cls = "h200") {
  int rc = 0;
  applyYaml(device(ns, name, cls, count), &rc);
  ASSERT_EQ(rc, 0) << name;
  ASSERT_TRUE(eventually([&] { return deviceOf(ns, name).phase == "Bound"; }, 20s))
      << kubectl("get gpudevice -n " + ns + " " + name + " -o yaml");
}

class VmiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "vmi-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "kubevirt", "vm", "race", "dry", "later", "vgpu", "raw", "move"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("vm-", 3, 4));
    applyYaml(gpuClass("h200", kH200, 8), &rc);
    ASSERT_EQ(rc, 0);
    // A vGPU node: parent p0 unhealthy, p1 with 1 created and 3 available slots.
    int vrc = 0;
    runCommand(cluster().bin() + "/tally-fixtures nodes --count 1 --prefix vgpu- --mode vm-vgpu --resource " +
                   std::string(kVgpu) + "=8 --wait-ready --timeout 120s --kubeconfig " + cluster().kubeconfig() +
                   " 2>&1",
               &vrc);
    ASSERT_EQ(vrc, 0);
    kubectl(
        "annotate node vgpu-0 --overwrite 'gpu.tally.dev/inventory={\"parents\":["
        "{\"id\":\"0000:3b:00.0\",\"healthy\":false,\"types\":{\"nvidia.com/A100-10C\":{\"total\":4,\"created\":0,"
        "\"available\":4}}},"
        "{\"id\":\"0000:5e:00.0\",\"healthy\":true,\"types\":{\"nvidia.com/A100-10C\":{\"total\":4,\"created\":1,"
        "\"available\":3}}}]}'",
        &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata: {name: a100-10c}\n") +
                  "spec: {workload: vm, allocation: vgpu, resourceName: " + kVgpu +
                  ", nodeMode: vm-vgpu, memoryMiB: 10240, maxCount: 4}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(
        std::string("apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\n") +
            "spec:\n  configuration:\n    permittedHostDevices:\n      pciHostDevices:\n" +
            "      - {pciVendorSelector: \"10DE:2335\", resourceName: " + kH200 +
            ", externalResourceProvider: true}\n      mediatedDevices:\n" +
            "      - {mdevNameSelector: \"GRID A100-10C\", resourceName: " + kVgpu +
            ", externalResourceProvider: true}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(startExtenderAndScheduler(name, "vmi-e2e", extenderPid));
    replicas[0] = new Replica(startReplica("vmi-a", kValidating, kReplicaArgs));
    ASSERT_TRUE(eventually([] { return leaseHolder() == "vmi-a"; })) << "vmi-a never took the Lease";
    replicas[1] = new Replica(startReplica("vmi-b", kValidating, kReplicaArgs));
    ASSERT_TRUE(service.start({replicas[0], replicas[1]}))
        << "the round-robin proxy in front of both replicas did not start";
    applyYaml(validatingConfiguration(service.port()), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(mutatingConfiguration(service.port()), &rc);
    ASSERT_EQ(rc, 0);
    for (Replica* r : replicas) {
      ASSERT_TRUE(eventually([r] {
        return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200;
      })) << r->identity
          << " never became ready; log: " << r->log;
    }
    ASSERT_TRUE(eventually([] {
      return !kubectl(std::string("get mutatingwebhookconfiguration ") + kMutating +
                      " -o jsonpath={.webhooks[0].clientConfig.caBundle}")
                  .empty();
    })) << "the caBundle was never injected into "
        << kMutating;
    // The API server calls the VMI webhook: a VMI naming a device that does not exist is refused.
    ASSERT_TRUE(eventually([] {
      auto created = cluster().client()->create(vmis("vm"), vmiJson("vm", "warmup", {"nothing"}));
      return !created && created.error().describe().find("[DeviceUnknown]") != std::string::npos;
    })) << "the API server never called the VMI webhook";
  }
  void TearDown() override {
    for (Replica* r : replicas) {
      if (r) stopReplica(*r, SIGTERM);
    }
    if (extenderPid > 0) {
      ::kill(extenderPid, SIGTERM);
      ::waitpid(extenderPid, nullptr, 0);
    }
    service.stop();
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new VmiEnvironment);

// (e) and the whole path: held + template on one node, gpus[] only, uid
// recorded, the launcher played, deletion releases the template.
// (h) A held device the binder put where no room is left beside it moves
// with its set: it serves no VM yet, so the VM door attaches it unplaced and
// the binder places the whole set on a node that holds it. First of the
// suite: every node is still empty (3 nodes of 4 H200).
TEST(VmDoor, AHeldDeviceWithoutRoomBesideItMovesWithItsSetToANodeThatHoldsIt) {
  bound("move", "held-m", 1);
  const std::string first = deviceOf("move", "held-m").node;
  ASSERT_FALSE(first.empty());
  // Best fit puts a second device beside it: 2 free there, 3 without the
  // held device, so the set of 4 fits only on an empty node.
  bound("move", "filler", 1);
  ASSERT_EQ(deviceOf("move", "filler").node, first);
  auto created =
      cluster().client()->create(vmis("move"), vmiJson("move", "vm-m", {"held-m"}, R"([{"class":"h200","count":3}])"));
  ASSERT_TRUE(created) << created.error().describe();
  const std::string token = jsonpathOf("vmi", "move", "vm-m", "{.metadata.annotations.gpu\\.tally\\.dev/attachment}");
  ASSERT_EQ(token.size(), 16u) << token;
  const std::string tmpl = "vm-m-" + token.substr(0, 8) + "-0";
  const Device held = deviceOf("move", "held-m"), made = deviceOf("move", tmpl);
  EXPECT_EQ(held.phase, "Attached");
  EXPECT_EQ(made.phase, "Attached");
  EXPECT_NE(held.node, first) << "the held device stayed where its set does not fit";
  EXPECT_EQ(held.node, made.node) << "the set is split";
  EXPECT_EQ(jsonpathOf("vmi", "move", "vm-m", "{range .spec.domain.devices.gpus[*]}{.deviceName} {end}"),
            std::string(kH200) + " " + kH200 + " " + kH200 + " " + kH200 + " ");
  // Gone with its VMI: the template deleted, the held device detached and still held.
  int rc = 0;
  kubectl("delete vmi -n move vm-m --timeout=30s", &rc);
  EXPECT_TRUE(eventually([&] { return !deviceOf("move", tmpl).exists && deviceOf("move", "held-m").vmi.empty(); }, 30s))
      << kubectl("get gpudevices -n move -o yaml");
  kubectl("delete gpudevice -n move held-m filler --timeout=30s", &rc);
  EXPECT_EQ(rc, 0);
}

TEST(VmDoor, AHeldDeviceAndATemplateAreAttachedOnOneNodeAndTheVmiAsksForExactlyThoseGpus) {
  bound("vm", "held-1", 1);
  const auto start = std::chrono::steady_clock::now();
  auto created =
      cluster().client()->create(vmis("vm"), vmiJson("vm", "vm1", {"held-1"}, R"([{"class":"h200","count":2}])"));
  ASSERT_TRUE(created) << created.error().describe();
  std::printf("VMI admitted in %.3f s (attach, create, binder placement, answer)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // (e) one gpus entry per GPU, the class's resource name; no resources key for it.
  const std::string gpus = jsonpathOf("vmi", "vm", "vm1", "{range .spec.domain.devices.gpus[*]}{.deviceName} {end}");
  EXPECT_EQ(gpus, std::string(kH200) + " " + kH200 + " " + kH200 + " ");
  const std::string requests = jsonpathOf("vmi", "vm", "vm1", "{.spec.domain.resources.requests}");
  EXPECT_EQ(requests.find("nvidia.com"), std::string::npos) << requests;
  const std::string token = jsonpathOf("vmi", "vm", "vm1", "{.metadata.annotations.gpu\\.tally\\.dev/attachment}");
  EXPECT_EQ(token.size(), 16u) << token;
  const std::string tmpl = "vm1-" + token.substr(0, 8) + "-0";
  Device held = deviceOf("vm", "held-1"), made = deviceOf("vm", tmpl);
  ASSERT_TRUE(made.exists) << "template device " << tmpl << " missing: " << kubectl("get gpudevices -n vm");
  EXPECT_EQ(held.phase, "Attached");
  EXPECT_EQ(made.phase, "Attached");
  EXPECT_EQ(held.node, made.node) << "the set is split";
  EXPECT_EQ(held.vmi, "vm1");
  EXPECT_EQ(held.token, token);
  // The VMI's uid is recorded once it exists.
  const std::string uid = jsonpathOf("vmi", "vm", "vm1", "{.metadata.uid}");
  EXPECT_TRUE(eventually([&] { return deviceOf("vm", "held-1").uid == uid && deviceOf("vm", tmpl).uid == uid; }, 20s))
      << kubectl("get gpudevices -n vm -o yaml");

  // The test plays virt-controller: the launcher pod asks for one GPU per
  // gpus[] entry, with the VMI's affinity as LiveUpdate may have rewritten it
  // (two terms, one of which matches no node): (f) the pod webhook pins every
  // term to the devices' node; kube-scheduler with tally-extender places it.
  int rc = 0;
  auto launcher = [&](const std::string& name, int count) {
    return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: vm\n" +
           "  labels: {kubevirt.io: virt-launcher, vm.kubevirt.io/name: vm1}\n" +
           "  ownerReferences:\n  - {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance, name: vm1, uid: " + uid +
           ", controller: true, blockOwnerDeletion: true}\n" +
           "spec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n" +
           "        nodeSelectorTerms:\n        - matchExpressions: [{key: kubernetes.io/hostname, operator: "
           "Exists}]\n" +
           "        - matchExpressions: [{key: e2e-never, operator: Exists}]\n" +
           "  schedulingGates: [{name: e2e.tally.dev/active-pods}]\n" +
           "  tolerations: [{operator: Exists}]\n  containers:\n  - name: compute\n    image: virt-launcher\n" +
           "    resources:\n      requests: {" + kH200 + ": " + std::to_string(count) + "}\n      limits: {" + kH200 +
           ": " + std::to_string(count) + "}\n";
  };
  std::string out = applyYaml(launcher("virt-launcher-vm1-abcde", 3), &rc);
  ASSERT_EQ(rc, 0) << out;
  const std::string pinned = jsonpathOf(
      "pod", "vm", "virt-launcher-vm1-abcde",
      "{range .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*]}"
      "{.matchFields[0].values[0]} {end}");
  EXPECT_EQ(pinned, held.node + " " + held.node + " ") << "every term carries the pin";
  const std::string podUid = jsonpathOf("pod", "vm", "virt-launcher-vm1-abcde", "{.metadata.uid}");
  auto activePods = [&](const std::string& node) {
    int code = 0;
    kubectl(
        "patch vmi -n vm vm1 --subresource=status --type=merge -p '{\"status\":{\"phase\":\"Running\","
        "\"activePods\":{\"" +
            podUid + "\":\"" + node + "\"}}}'",
        &code);
    return code == 0;
  };
  // As virt-controller does, the VMI lists the pod before it is scheduled
  // (the gate stands for the moment between its create and the listing).
  auto ungate = [&](const std::string& pod) {
    int code = 0;
    kubectl("patch pod -n vm " + pod + " --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}]'",
            &code);
    return code == 0;
  };
  ASSERT_TRUE(activePods(""));
  ASSERT_TRUE(ungate("virt-launcher-vm1-abcde"));
  ASSERT_TRUE(eventually(
      [&] { return jsonpathOf("pod", "vm", "virt-launcher-vm1-abcde", "{.spec.nodeName}") == held.node; }, 30s))
      << kubectl("get pod -n vm virt-launcher-vm1-abcde -o yaml") << kubectl("get events -n vm");
  ASSERT_TRUE(activePods(held.node));
  // (e) The node's 4 units: 3 held by the set and the launcher covered by
  // them, not counted again: one more GPU can still be ordered there.
  out = applyYaml(device("vm", "probe", "h200", 1), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(eventually([&] { return deviceOf("vm", "probe").node == held.node; }, 20s))
      << kubectl("get gpudevice -n vm probe -o yaml");
  // (h) A pod with the VMI's owner reference and labels that the VMI does not
  // list in activePods borrows nothing: pinned like a launcher, its GPU is
  // raw usage, and the node (3 held + the probe) has none left for it.
  out = applyYaml(launcher("virt-launcher-vm1-fake", 1), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(ungate("virt-launcher-vm1-fake"));
  auto failed = [] {
    return kubectl(
        "get events -n vm --field-selector involvedObject.name=virt-launcher-vm1-fake,reason=FailedScheduling"
        " -o jsonpath={.items[*].message}");
  };
  EXPECT_TRUE(eventually([&] { return !failed().empty(); }, 30s)) << kubectl("get events -n vm");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(jsonpathOf("pod", "vm", "virt-launcher-vm1-fake", "{.spec.nodeName}"), "")
      << "the fake launcher was scheduled on the VMI's devices";
  std::printf("fake launcher: %s\n", failed().substr(0, 400).c_str());
  kubectl("delete pod -n vm virt-launcher-vm1-fake --grace-period=0 --force", &rc);
  // (j) Deleted: the template device goes, the held one is detached and stays Bound.
  kubectl("delete vmi -n vm vm1 --timeout=30s", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually([&] { return !deviceOf("vm", tmpl).exists; }, 30s)) << "template device not deleted";
  EXPECT_TRUE(eventually(
      [&] {
        Device d = deviceOf("vm", "held-1");
        return d.phase == "Bound" && d.vmi.empty() && d.node == held.node;
      },
      30s))
      << kubectl("get gpudevice -n vm held-1 -o yaml");
  EXPECT_NE(kubectl("get events -n vm -o jsonpath={.items[*].reason}").find("TemplateDeleted"), std::string::npos);
  kubectl("delete pod -n vm virt-launcher-vm1-abcde --grace-period=0 --force", &rc);
  kubectl("delete gpudevice -n vm probe held-1 --timeout=30s", &rc);
}

// (c) Reinvocation: a later mutator (as virt-api's) changes the VMI after
// Tally's answer, so the API server calls Tally again for the same VMI: the
// second call finds its own attachment by the token, writes nothing and
// answers the same.
TEST(VmDoor, CalledAgainForTheSameVmiTheWebhookWritesNothingMoreAndAnswersTheSame) {
  // A stand-in for virt-api's mutator, served with the controller's own
  // certificate (so the injected caBundle covers it): it adds one annotation.
  const auto dir = std::filesystem::temp_directory_path() / ("vmi-e2e-" + std::to_string(::getpid()));
  const std::string certs = std::filesystem::path(replicas[0]->log).parent_path().string() + "/certs";
  const std::uint16_t port = freePort();
  const std::string script = (dir / "mutator.py").string();
  std::ofstream(script)
      << "import base64, http.server, json, ssl, sys\n"
         "class H(http.server.BaseHTTPRequestHandler):\n"
         "    def log_message(self, *a): pass\n"
         "    def do_POST(self):\n"
         "        review = json.loads(self.rfile.read(int(self.headers['Content-Length'])))\n"
         "        patch = [{'op': 'add', 'path': '/metadata/annotations/e2e~1mutated', 'value': 'yes'}]\n"
         "        body = json.dumps({'apiVersion': 'admission.k8s.io/v1', 'kind': 'AdmissionReview',\n"
         "            'response': {'uid': review['request']['uid'], 'allowed': True, 'patchType': 'JSONPatch',\n"
         "                         'patch': base64.b64encode(json.dumps(patch).encode()).decode()}}).encode()\n"
         "        self.send_response(200)\n"
         "        self.send_header('Content-Type', 'application/json')\n"
         "        self.send_header('Content-Length', str(len(body)))\n"
         "        self.end_headers()\n"
         "        self.wfile.write(body)\n"
         "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
         "ctx.load_cert_chain(sys.argv[2] + '/tls.crt', sys.argv[2] + '/tls.key')\n"
         "srv = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H)\n"
         "srv.socket = ctx.wrap_socket(srv.socket, server_side=True)\n"
         "srv.serve_forever()\n";
  // Stopped however the test ends.
  const PythonProcess mutator(script, {std::to_string(port), certs});
  int rc = 0;
  const std::string patchFile = (dir / "standin-patch.json").string();
  std::ofstream(patchFile)
      << "[{\"op\":\"add\",\"path\":\"/webhooks/-\",\"value\":{"
         "\"name\":\"virt-api-standin.e2e.tally.dev\",\"admissionReviewVersions\":[\"v1\"],"
         "\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\",\"timeoutSeconds\":5,\"reinvocationPolicy\":\"Never\","
         "\"clientConfig\":{\"url\":\"https://127.0.0.1:"
      << port
      << "/mutate\"},\"rules\":[{\"apiGroups\":[\"kubevirt.io\"],\"apiVersions\":[\"v1\"],\"operations\":[\"CREATE\"],"
         "\"resources\":[\"virtualmachineinstances\"],\"scope\":\"Namespaced\"}],"
         "\"matchConditions\":[{\"name\":\"reinvoke\",\"expression\":\"has(object.metadata.labels) && "
         "'e2e-reinvoke' in object.metadata.labels\"}]}}]";
  std::string patched = kubectl(
      std::string("patch mutatingwebhookconfiguration ") + kMutating + " --type=json --patch-file " + patchFile, &rc);
  ASSERT_EQ(rc, 0) << patched;
  EXPECT_TRUE(eventually([] {
    return !kubectl(std::string("get mutatingwebhookconfiguration ") + kMutating +
                    " -o jsonpath={.webhooks[2].clientConfig.caBundle}")
                .empty();
  })) << "the caBundle was not injected into the stand-in's entry";
  bound("vm", "held-r", 1);
  const std::string before = jsonpathOf("gpudevice", "vm", "held-r", "{.metadata.resourceVersion}");
  auto reinvoked = [] {
    std::size_t n = 0;
    for (Replica* r : replicas) {
      const std::string m = metricsOf(*r);
      const std::string name = "\ntally_controller_vmi_reviews_total{result=\"reinvoked\"} ";
      const auto at = m.find(name);
      if (at != std::string::npos) n += std::stoul(m.substr(at + name.size()));
    }
    return n;
  };
  const std::size_t reinvokedBefore = reinvoked();
  std::string created;
  ASSERT_TRUE(eventually(
      [&] {
        auto r = cluster().client()->create(
            vmis("vm"),
            vmiJson("vm", "vm-re", {"held-r"}, R"([{"class":"h200","count":1}])", "\"e2e-reinvoke\":\"yes\""));
        created = r ? *r : r.error().describe();
        return bool(r);
      },
      20s))
      << created;
  EXPECT_NE(created.find("\"e2e/mutated\":\"yes\""), std::string::npos) << "the stand-in did not run: " << created;
  EXPECT_EQ(reinvoked(), reinvokedBefore + 1) << "the API server did not call Tally again";
  // Written once: one template device, the held device attached once, and
  // the same gpus[] (2 entries, no duplicate from the second call).
  const std::string token = jsonpathOf("vmi", "vm", "vm-re", "{.metadata.annotations.gpu\\.tally\\.dev/attachment}");
  std::vector<std::string> made;
  for (const auto& n : deviceNames("vm")) {
    if (n.rfind("vm-re-", 0) == 0) made.push_back(n);
  }
  EXPECT_EQ(made, std::vector<std::string>{"vm-re-" + token.substr(0, 8) + "-0"});
  EXPECT_EQ(jsonpathOf("vmi", "vm", "vm-re", "{range .spec.domain.devices.gpus[*]}{.name} {end}"),
            "held-r vm-re-" + token.substr(0, 8) + "-0 ");
  EXPECT_EQ(deviceOf("vm", "held-r").token, token);
  EXPECT_NE(jsonpathOf("gpudevice", "vm", "held-r", "{.metadata.resourceVersion}"), before);
  kubectl(std::string("patch mutatingwebhookconfiguration ") + kMutating +
              " --type=json -p '[{\"op\":\"remove\",\"path\":\"/webhooks/2\"}]'",
          &rc);
  // (4) Uid, not names: the VMI recreated under the same name gets the held
  // device again, matched to the new uid; the old template device goes.
  const std::string oldUid = jsonpathOf("vmi", "vm", "vm-re", "{.metadata.uid}");
  EXPECT_TRUE(eventually([&] { return deviceOf("vm", "held-r").uid == oldUid; }, 20s));
  kubectl("delete vmi -n vm vm-re --timeout=30s", &rc);
  ASSERT_EQ(rc, 0);
  std::string again;
  ASSERT_TRUE(eventually(
      [&] {
        auto r = cluster().client()->create(vmis("vm"), vmiJson("vm", "vm-re", {"held-r"}));
        again = r ? std::string("admitted") : r.error().describe();
        return bool(r);
      },
      30s))
      << again;
  const std::string newUid = jsonpathOf("vmi", "vm", "vm-re", "{.metadata.uid}");
  EXPECT_NE(newUid, oldUid);
  EXPECT_TRUE(eventually([&] { return deviceOf("vm", "held-r").uid == newUid; }, 20s))
      << kubectl("get gpudevice -n vm held-r -o yaml");
  EXPECT_TRUE(eventually([&] { return !deviceOf("vm", made.empty() ? "none" : made[0]).exists; }, 30s));
  kubectl("delete vmi -n vm vm-re --timeout=30s", &rc);
  EXPECT_TRUE(eventually([&] { return deviceOf("vm", "held-r").vmi.empty(); }, 30s));
  kubectl("delete gpudevice -n vm held-r --timeout=30s", &rc);
}

// The raw GPU pod webhook: a pod over its tenant's budget is refused at
// admission with the model's message; one within it is admitted.
TEST(VmDoor, ARawGpuPodOverItsBudgetIsRefusedAtAdmission) {
  int rc = 0;
  applyYaml(std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
                "metadata: {name: plan-quota, namespace: raw}\nspec: {hard: {requests." + kH200 + ": \"1\"}}\n",
            &rc);
  ASSERT_EQ(rc, 0);
  auto pod = [](const std::string& name, int gpus) {
    return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: raw}\nspec:\n" +
           "  tolerations: [{operator: Exists}]\n  containers:\n  - name: c\n    image: trainer\n" +
           "    resources:\n      requests: {" + kH200 + ": " + std::to_string(gpus) + "}\n      limits: {" + kH200 +
           ": " + std::to_string(gpus) + "}\n";
  };
  std::string out;
  EXPECT_TRUE(eventually(
      [&] {
        out = applyYaml(pod("too-big", 2), &rc);
        return rc != 0 && out.find("[BudgetExceeded]") != std::string::npos;
      },
      20s))
      << out;
  EXPECT_NE(out.find("plan-quota"), std::string::npos) << out;
  out = applyYaml(pod("fits", 1), &rc);
  EXPECT_EQ(rc, 0) << out;
  kubectl("delete pod -n raw fits --grace-period=0 --force", &rc);
}

// (b) A dry run and a refusal leave no trace.
TEST(VmDoor, ADryRunAndARefusedVmiLeaveNoDeviceNoAttachmentNoEvent) {
  bound("dry", "held-d", 1);
  const std::string before = jsonpathOf("gpudevice", "dry", "held-d", "{.metadata.resourceVersion}");
  const auto path = std::filesystem::temp_directory_path() / ("vmi-dry-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << vmiJson("dry", "vm-dry", {"held-d"}, R"([{"class":"h200","count":1}])");
  int rc = 0;
  std::string out =
      kubectl("create --dry-run=server -o jsonpath={.spec.domain.devices.gpus[*].deviceName} -f " + path.string(), &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, std::string(kH200) + " " + kH200) << "the dry run is answered as the real create would be";
  std::filesystem::remove(path);
  // Refused: a template no node can hold beside the held device (its node has 3 free).
  auto refused =
      cluster().client()->create(vmis("dry"), vmiJson("dry", "vm-big", {"held-d"}, R"([{"class":"h200","count":4}])"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().describe().find("[NodeInsufficient]"), std::string::npos) << refused.error().describe();
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(deviceNames("dry"), std::vector<std::string>{"held-d"}) << "a template device was created";
  EXPECT_EQ(jsonpathOf("gpudevice", "dry", "held-d", "{.metadata.resourceVersion}"), before)
      << "the held device was written: " << kubectl("get gpudevice -n dry held-d -o yaml");
  EXPECT_TRUE(deviceOf("dry", "held-d").vmi.empty());
  EXPECT_EQ(kubectl("get vmi -n dry -o name"), "");
  const std::string reasons = kubectl("get events -n dry -o jsonpath={.items[*].reason}");
  EXPECT_EQ(reasons.find("Attached"), std::string::npos) << reasons;
  EXPECT_EQ(reasons.find("TemplateDeleted"), std::string::npos) << reasons;
  kubectl("delete gpudevice -n dry held-d --timeout=30s", &rc);
}

// Only the API server may speak to the VM door: a review a tenant forges and
// posts straight to the webhook port (no client certificate, or the cluster
// admin's, which is no webhook caller) is refused before the handler runs,
// and the held device it names is not attached, not written, no template made.
TEST(VmDoor, AForgedVmiReviewFromAnyoneButTheApiServerAttachesNothing) {
  bound("dry", "held-f", 1);
  const std::string before = jsonpathOf("gpudevice", "dry", "held-f", "{.metadata.resourceVersion}");
  const auto path = std::filesystem::temp_directory_path() / ("vmi-forged-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged",)"
                      << R"("kind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachineInstance"},)"
                      << R"("resource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachineinstances"},)"
                      << R"("namespace":"dry","name":"vm-forged","operation":"CREATE",)"
                      << R"("userInfo":{"username":"system:serviceaccount:kubevirt:kubevirt-apiserver"},"object":)"
                      << vmiJson("dry", "vm-forged", {"held-f"}, R"([{"class":"h200","count":1}])") << "}}";
  const std::string pki = cluster().state() + "/pki/";
  const std::string url =
      "https://127.0.0.1:" + std::to_string(replicas[0]->webhookPort) + std::string(controller::kVmiWebhookPath);
  auto post = [&](const std::string& cert) {
    const std::string credential = cert.empty() ? "" : " --cert " + pki + cert + ".crt --key " + pki + cert + ".key";
    return runCommand(
        "curl -sk --max-time 10 -o - -w ' %{http_code}' -H 'Content-Type: application/json' "
        "--data-binary @" +
        path.string() + credential + " " + url);
  };
  const std::string anonymous = post("");
  EXPECT_NE(anonymous.find(" 401"), std::string::npos) << anonymous;
  const std::string admin = post("admin");
  EXPECT_NE(admin.find(" 403"), std::string::npos) << admin;
  std::filesystem::remove(path);
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(jsonpathOf("gpudevice", "dry", "held-f", "{.metadata.resourceVersion}"), before)
      << "the held device was written: " << kubectl("get gpudevice -n dry held-f -o yaml");
  EXPECT_TRUE(deviceOf("dry", "held-f").vmi.empty());
  const auto names = deviceNames("dry");
  EXPECT_EQ(std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.starts_with("vm-forged"); }),
            0)
      << "a template device was created for the forged VMI";
  const std::string metrics = metricsOf(*replicas[0]);
  EXPECT_NE(metrics.find("tally_controller_webhook_rejected_total{kind=\"unauthenticated\"}"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tally_controller_webhook_rejected_total{kind=\"forbidden\"}"), std::string::npos);
  int rc = 0;
  kubectl("delete gpudevice -n dry held-f --timeout=30s", &rc);
}

// (g) No single node holds the set: refused at admission, never a Pending VMI.
TEST(VmDoor, ASetNoSingleNodeCanHoldIsRefusedAtAdmission) {
  // 12 free units on 3 nodes of 4: a set of 5 fits on none.
  auto refused = cluster().client()->create(
      vmis("vm"), vmiJson("vm", "vm-huge", {}, R"([{"class":"h200","count":3},{"class":"h200","count":2}])"));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().describe().find("[NoSingleNode]"), std::string::npos) << refused.error().describe();
  EXPECT_EQ(kubectl("get vmi -n vm vm-huge -o name --ignore-not-found"), "");
  // And a class KubeVirt does not permit.
  int rc = 0;
  applyYaml(gpuClass("unlisted", "nvidia.com/unlisted", 2), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually([] {
    auto r =
        cluster().client()->create(vmis("vm"), vmiJson("vm", "vm-unlisted", {}, R"([{"class":"unlisted","count":1}])"));
    return !r && r.error().describe().find("[NotPermitted]") != std::string::npos &&
           r.error().describe().find("permittedHostDevices") != std::string::npos;
  }));
}

// (d) A vGPU node with one unhealthy parent. An unhealthy parent is the seed's
// stop condition (DegradedHealth): the pool is closed to new VMIs, at the
// door's own evaluation of the gate (no auditor runs here). Once that parent
// is healthy again but serves no slot of the type, the other parent's free
// slots serve, and the binder keeps the placement.
TEST(VmDoor, AVgpuSetIsServedByTheHealthyParentsSlotsAndTheBinderKeepsIt) {
  auto closed =
      cluster().client()->create(vmis("vgpu"), vmiJson("vgpu", "vm-closed", {}, R"([{"class":"a100-10c","count":1}])"));
  ASSERT_FALSE(closed) << "an unhealthy parent closes the pool";
  EXPECT_NE(closed.error().describe().find("[GateClosed] creation in pool a100-10c is closed"), std::string::npos)
      << closed.error().describe();
  int rc = 0;
  kubectl(
      "annotate node vgpu-0 --overwrite 'gpu.tally.dev/inventory={\"parents\":["
      "{\"id\":\"0000:3b:00.0\",\"healthy\":true,\"types\":{}},"
      "{\"id\":\"0000:5e:00.0\",\"healthy\":true,\"types\":{\"nvidia.com/A100-10C\":{\"total\":4,\"created\":1,"
      "\"available\":3}}}]}'",
      &rc);
  ASSERT_EQ(rc, 0);
  std::optional<Result<std::string>> created;
  ASSERT_TRUE(eventually(
      [&] {
        created.emplace(cluster().client()->create(vmis("vgpu"),
                                                   vmiJson("vgpu", "vm-v", {}, R"([{"class":"a100-10c","count":3}])")));
        return static_cast<bool>(*created);
      },
      20s))
      << created->error().describe();
  const std::string token = jsonpathOf("vmi", "vgpu", "vm-v", "{.metadata.annotations.gpu\\.tally\\.dev/attachment}");
  const std::string tmpl = "vm-v-" + token.substr(0, 8) + "-0";
  EXPECT_EQ(deviceOf("vgpu", tmpl).node, "vgpu-0");
  // The binder agrees: a few seconds later it is still held there, not Lost.
  std::this_thread::sleep_for(3s);
  Device d = deviceOf("vgpu", tmpl);
  EXPECT_EQ(d.phase, "Attached");
  EXPECT_EQ(d.node, "vgpu-0");
  // One more than the healthy parent serves is refused by the webhook as the binder would.
  auto over =
      cluster().client()->create(vmis("vgpu"), vmiJson("vgpu", "vm-v2", {}, R"([{"class":"a100-10c","count":2}])"));
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().describe().find("a100-10c"), std::string::npos) << over.error().describe();
  kubectl("delete vmi -n vgpu vm-v --timeout=30s", &rc);
  EXPECT_TRUE(eventually([&] { return deviceNames("vgpu").empty(); }, 30s));
}

// (i) Refused by a later admission stage: the attachment and template devices
// this VMI's webhook call wrote are gone within the bound.
TEST(VmDoor, AVmiALaterAdmissionStageRefusesLeavesNothingBehind) {
  bound("later", "held-l", 1);
  int rc = 0;
  applyYaml(
      "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n"
      "metadata: {name: vmi-e2e-refuse}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n"
      "    resourceRules:\n    - apiGroups: [kubevirt.io]\n      apiVersions: [v1]\n      operations: [CREATE]\n"
      "      resources: [virtualmachineinstances]\n  validations:\n"
      "  - expression: \"!has(object.metadata.labels) || !('e2e-refuse' in object.metadata.labels)\"\n"
      "    message: refused by a later admission stage\n---\n"
      "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n"
      "metadata: {name: vmi-e2e-refuse}\nspec:\n  policyName: vmi-e2e-refuse\n  validationActions: [Deny]\n",
      &rc);
  ASSERT_EQ(rc, 0);
  // The policy is in force once a labelled VMI without devices (never sent
  // to Tally) is refused by it.
  ASSERT_TRUE(eventually(
      [&] {
        const std::string probe =
            "{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\","
            "\"metadata\":{\"name\":\"probe\",\"labels\":{\"e2e-refuse\":\"yes\"}},"
            "\"spec\":{\"domain\":{\"devices\":{}}}}";
        auto r = cluster().client()->create(vmis("later"), probe);
        if (r) kubectl("delete vmi -n later probe");
        return !r && r.error().describe().find("later admission stage") != std::string::npos;
      },
      20s));
  auto r = cluster().client()->create(
      vmis("later"),
      vmiJson("later", "vm-later", {"held-l"}, R"([{"class":"h200","count":1}])", "\"e2e-refuse\":\"yes\""));
  ASSERT_FALSE(r);
  ASSERT_NE(r.error().describe().find("later admission stage"), std::string::npos) << r.error().describe();
  const auto refusedAt = std::chrono::steady_clock::now();
  // The webhook attached and created before the policy refused.
  EXPECT_TRUE(eventually([&] { return deviceNames("later").size() == 1 && deviceOf("later", "held-l").vmi.empty(); },
                         std::chrono::seconds(kAttachTimeoutSeconds + 20)))
      << kubectl("get gpudevices -n later -o yaml");
  std::printf("refused by a later stage: attachment undone %.1f s after the refusal (bound %d s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - refusedAt).count(),
              kAttachTimeoutSeconds);
  EXPECT_EQ(deviceOf("later", "held-l").phase, "Bound");
  kubectl("delete validatingadmissionpolicybinding vmi-e2e-refuse", &rc);
  kubectl("delete validatingadmissionpolicy vmi-e2e-refuse", &rc);
  kubectl("delete gpudevice -n later held-l --timeout=30s", &rc);
}

// (a) and (k): 20 VMIs race for one held device; exactly one attaches, 10
// rounds, the leader killed in the 5th.
struct Round {
  int admitted = 0, refused = 0;
  int failed = 0;  // creates that failed (not refused): the webhook could not be called
  std::string winner;
  std::map<std::string, int> reasons;
  bool holderNamed = true;
};

Round race(int round, bool killLeader) {
  Round result;
  std::mutex mu;
  std::atomic<int> next{0};
  std::shared_ptr<Client> client = cluster().client();
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < 20;) {
        const std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
        for (int attempt = 0;; ++attempt) {
          auto created = client->create(vmis("race"), vmiJson("race", name, {"contested"}));
          std::unique_lock lock(mu);
          if (created) {
            ++result.admitted;
            result.winner = name;
            break;
          }
          const std::string message = created.error().describe();
          if (message.find("denied the request") != std::string::npos) {
            ++result.refused;
            const auto open = message.find("[");
            const auto close = open == std::string::npos ? open : message.find("]", open);
            result.reasons[close == std::string::npos ? message : message.substr(open, close - open + 1)]++;
            if (message.find("gpudevice/race/contested") == std::string::npos ||
                message.find("attached to vmi/race/") == std::string::npos) {
              result.holderNamed = false;
              std::printf("  refusal without the device or its holder: %s\n", message.c_str());
            }
            break;
          }
          // A webhook call that failed (the killed replica's connection): counted, and
          // the create retried as a client would.
          ++result.failed;
          std::printf("  %s: create failed (attempt %d): %s\n", name.c_str(), attempt + 1, message.c_str());
          if (attempt > 100) {
            ADD_FAILURE() << name << ": " << message;
            break;
          }
          lock.unlock();
          std::this_thread::sleep_for(100ms);
        }
      }
    });
  }
  if (killLeader) {
    std::this_thread::sleep_for(50ms);
    Replica& victim = leader();
    stopReplica(victim, SIGKILL);
    std::printf("round %d: killed the leader %s during the race (no URL changed)\n", round, victim.identity.c_str());
    // The Deployment's replacement: a new process, its port in the proxy's endpoints.
    victim = startReplica(victim.identity + "-again", kValidating, kReplicaArgs);
    service.endpoints({replicas[0], replicas[1]});
  }
  for (auto& t : threads) t.join();
  return result;
}

TEST(VmDoor, TwentyVmisRaceForOneHeldDeviceTenTimesAndExactlyOneAttachesEachTime) {
  bound("race", "contested", 1);
  int failedCreates = 0;
  // Both replicas' caches hold the device Bound before the race: dry runs
  // through the proxy (alternating replicas) are admitted six times in a row.
  int inARow = 0;
  ASSERT_TRUE(eventually(
      [&] {
        HttpRequest request;
        request.method = "POST";
        request.target = vmis("race").collectionPath() + "?dryRun=All";
        request.body = vmiJson("race", "warmup", {"contested"});
        request.contentType = "application/json";
        auto sent = cluster().client()->send(request);
        inARow = sent && sent->status == 201 ? inARow + 1 : 0;
        return inARow >= 6;
      },
      30s))
      << "dry runs through the proxy were not admitted";
  const auto before = service.connections();
  for (int round = 1; round <= 10; ++round) {
    const bool kill = round == 5;
    Round r = race(round, kill);
    std::printf("round %d: %d admitted (%s), %d refused, %d failed creates:", round, r.admitted, r.winner.c_str(),
                r.refused, r.failed);
    failedCreates += r.failed;
    for (const auto& [code, n] : r.reasons) std::printf(" %s %d", code.c_str(), n);
    std::printf("\n");
    EXPECT_EQ(r.admitted, 1) << "round " << round;
    EXPECT_EQ(r.admitted + r.refused, 20) << "round " << round;
    EXPECT_TRUE(r.holderNamed) << "round " << round;
    // Exactly one VMI exists, and the device is attached to it alone.
    std::string names = kubectl("get vmi -n race -o jsonpath={.items[*].metadata.name}");
    EXPECT_EQ(names, r.winner) << "round " << round;
    Device d = deviceOf("race", "contested");
    EXPECT_EQ(d.vmi, r.winner) << "round " << round;
    EXPECT_EQ(d.phase, "Attached");
    const std::string uid = jsonpathOf("vmi", "race", r.winner, "{.metadata.uid}");
    EXPECT_TRUE(eventually([&] { return deviceOf("race", "contested").uid == uid; }, 20s))
        << "round " << round << ": the uid was not recorded (leader " << leaseHolder() << ")";
    // The winner stops: the device is detached and free for the next round.
    int rc = 0;
    kubectl("delete vmi -n race " + r.winner + " --timeout=30s", &rc);
    EXPECT_TRUE(eventually(
        [&] {
          Device after = deviceOf("race", "contested");
          return after.vmi.empty() && after.phase == "Bound";
        },
        30s))
        << "round " << round << ": not detached: " << kubectl("get gpudevice -n race contested -o yaml");
    if (::testing::Test::HasFailure()) break;
  }
  const std::string metrics = metricsOf(leader());
  EXPECT_NE(metrics.find("tally_controller_binder_attachments_total{action=\"detached\"}"), std::string::npos);
  std::size_t conflicts = 0;
  for (Replica* r : replicas) {
    conflicts += static_cast<std::size_t>(metricOf(*r, "tally_controller_vmi_attach_conflicts_total"));
  }
  std::printf("attach conflicts read again and decided again: %zu\n", conflicts);
  std::printf("creates that failed (the killed leader's connections), retried: %d\n", failedCreates);
  // Only a call the killed leader held when it died may fail (the API server
  // does not retry a POST whose connection broke): one per racing client.
  EXPECT_LE(failedCreates, 20);
  // The race was spread over both replicas: each decided some reviews, and
  // they met on the device (a conflict read again and decided again).
  const auto after = service.connections();
  int served = 0;
  for (const auto& [backend, n] : after) {
    const int during = n - (before.count(backend) ? before.at(backend) : 0);
    std::printf("  proxy: %d connections to %s during the race\n", during, backend.c_str());
    if (during > 0) ++served;
  }
  EXPECT_GE(served, 2) << "the race did not reach both replicas";
  EXPECT_GT(conflicts, 0u) << "two replicas racing for one device never met a conflict";
}

// The API server restarted under the running binaries (both controller
// replicas, tally-extender, kube-scheduler): none is restarted, every watch
// resumes, and what is written after the restart reaches every cache. A
// device ordered now is placed by the leader's binder; a VMI naming it is
// admitted through the proxy, so by either replica; a pod asking for GPUs is
// placed by kube-scheduler through the extender on a node with free units.
TEST(VmDoor, TheApiServerRestartedUnderTheRunningBinariesEveryoneResumesWithoutARestart) {
  std::vector<pid_t> pids = {extenderPid};
  for (Replica* r : replicas) pids.push_back(r->pid);
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster().restartApiserver()) << "kube-apiserver did not come back";
  std::printf("kube-apiserver restarted in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count());
  for (Replica* r : replicas) {
    EXPECT_TRUE(eventually(
        [r] { return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200; }, 60s))
        << r->identity << " not ready after the restart";
  }
  bound("dry", "after-restart", 1);
  int rc = 0;
  std::string last;
  EXPECT_TRUE(eventually(
      [&] {
        auto created = cluster().client()->create(vmis("dry"), vmiJson("dry", "vm-after-restart", {"after-restart"}));
        if (created) return true;
        last = created.error().describe();
        return false;
      },
      60s))
      << "no VMI admitted after the restart: " << last;
  EXPECT_EQ(deviceOf("dry", "after-restart").vmi, "vm-after-restart");
  kubectl("delete vmi -n dry vm-after-restart --timeout=30s", &rc);
  EXPECT_TRUE(eventually([] { return deviceOf("dry", "after-restart").vmi.empty(); }, 30s));
  kubectl("delete gpudevice -n dry after-restart --timeout=30s", &rc);
  // Still the same processes: nothing had to be restarted to recover.
  for (pid_t pid : pids) EXPECT_EQ(::kill(pid, 0), 0) << "pid " << pid << " is gone";
}

}  // namespace
}  // namespace tally::runtime::e2e
