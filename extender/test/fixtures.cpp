#include "fixtures.hpp"

#include "tally/state/testing/objects.hpp"

namespace tally::extender::testing {

model::DeviceClass passthroughClass(std::string name, std::string resource) {
  model::DeviceClass c;
  c.name = std::move(name);
  c.workload = model::Workload::Vm;
  c.allocation = model::Allocation::Passthrough;
  c.resourceName = std::move(resource);
  c.nodeMode = model::NodeMode::VmPassthrough;
  c.memoryMiB = 141 * 1024;
  c.maxCount = 8;
  return c;
}

model::Node gpuNode(std::string name, std::int64_t devices, model::NodeMode mode, std::string resource) {
  model::Node n = state::testing::gpuNode(std::move(name), devices, std::move(resource));
  n.activeMode = mode;
  n.expectedMode = mode;
  return n;
}

model::Namespace tenantNamespace(std::string name) { return state::testing::tenant(std::move(name)); }

model::Pod gpuPod(std::string ns, std::string name, std::string uid, std::int64_t count, std::string node,
                  std::string resource) {
  model::Pod p = state::testing::gpuPod(std::move(ns), std::move(name), count, std::move(node), std::move(resource));
  p.uid = std::move(uid);
  return p;
}

std::unique_ptr<CacheWriter> loadedWriter(const std::vector<state::Object>& objects, CacheWriter::Options options) {
  options.watched.clear();
  auto writer = std::make_unique<CacheWriter>(options);
  for (const auto& o : objects) writer->upsert(o);
  writer->flush();
  return writer;
}

std::string podJson(const std::string& ns, const std::string& name, const std::string& uid, std::int64_t count,
                    const std::string& resource) {
  std::string n = std::to_string(count);
  return R"({"metadata":{"name":")" + name + R"(","namespace":")" + ns + R"(","uid":")" + uid +
         R"(","labels":{"app":"x"}},"spec":{"schedulerName":"tally-scheduler","containers":[{"name":"c","image":"busybox",)"
         R"("resources":{"requests":{"cpu":"500m",")" +
         resource + R"(":")" + n + R"("},"limits":{")" + resource + R"(":")" + n +
         R"("}}}]},"status":{"phase":"Pending"}})";
}

std::string extenderArgs(const std::string& pod, const std::vector<std::string>& nodes) {
  std::string body = R"({"Pod":)" + pod + R"(,"Nodes":null,"NodeNames":[)";
  for (std::size_t i = 0; i < nodes.size(); ++i) body += (i ? ",\"" : "\"") + nodes[i] + "\"";
  return body + "]}";
}

std::string extenderArgsWithNodeList(const std::string& pod, const std::vector<std::string>& nodes) {
  std::string body = R"({"Pod":)" + pod + R"(,"Nodes":{"metadata":{"resourceVersion":"7"},"items":[)";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i) body += ',';
    body += R"({"metadata":{"name":")" + nodes[i] +
            R"(","labels":{"kube-dc.com/gpu.workload-mode":"vm-passthrough","kubernetes.io/hostname":")" + nodes[i] +
            R"("},"annotations":{"node.alpha.kubernetes.io/ttl":"0"}},"spec":{"podCIDR":"10.0.0.0/24"},)"
            R"("status":{"allocatable":{"cpu":"64","memory":"512Gi","nvidia.com/GH100_H200_SXM_141GB":"8"},)"
            R"("conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}],)"
            R"("images":[{"names":["registry.k8s.io/pause:3.9"],"sizeBytes":300000}]}})";
  }
  return body + "]},\"NodeNames\":null}";
}

std::vector<state::Object> syntheticCluster(std::size_t nodes, std::size_t pods, std::size_t namespaces) {
  std::vector<state::Object> out;
  out.emplace_back(passthroughClass());
  for (std::size_t i = 0; i < namespaces; ++i) out.emplace_back(tenantNamespace("tenant-" + std::to_string(i)));
  for (std::size_t i = 0; i < nodes; ++i) out.emplace_back(gpuNode("node-" + std::to_string(i)));
  for (std::size_t i = 0; i < pods; ++i) {
    std::string node = "node-" + std::to_string(i % nodes);
    out.emplace_back(gpuPod("tenant-" + std::to_string(i % namespaces), "pod-" + std::to_string(i),
                            "uid-" + std::to_string(i), 1, node));
  }
  return out;
}

}  // namespace tally::extender::testing
