#include "tally/extender/testing/fixtures.hpp"

namespace tally::extender::testing {

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
  using namespace model::testing;
  std::vector<state::Object> out;
  out.emplace_back(passthroughClass());
  for (std::size_t i = 0; i < namespaces; ++i) out.emplace_back(ns("tenant-" + std::to_string(i)));
  for (std::size_t i = 0; i < nodes; ++i) out.emplace_back(gpuNode("node-" + std::to_string(i)));
  for (std::size_t i = 0; i < pods; ++i) {
    model::Pod pod = gpuPod("tenant-" + std::to_string(i % namespaces), "pod-" + std::to_string(i), kH200, 1,
                            "node-" + std::to_string(i % nodes));
    pod.uid = "uid-" + std::to_string(i);  // the victims the fuzz corpus names
    out.emplace_back(std::move(pod));
  }
  return out;
}

}  // namespace tally::extender::testing
