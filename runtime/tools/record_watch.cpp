// Records the raw body of a watch (or a LIST) from the API server named by
// $KUBECONFIG, for golden test frames and decode benchmarks.
//
//   tally-record-watch --resource pods [--namespace ns] [--wire json|protobuf]
//                      [--rv 0] [--seconds 5] [--max-bytes N] [--list] --out FILE

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "tally/runtime/client.hpp"

using namespace tally::runtime;

int main(int argc, char** argv) {
  CLI::App app{"record a Kubernetes watch stream"};
  std::string resource = "pods", ns, group, version = "v1", wire = "json", rv = "0", out;
  double seconds = 5;
  size_t maxBytes = 1ull << 31;
  bool list = false;
  int64_t limit = 0;
  app.add_option("--resource", resource);
  app.add_option("--group", group);
  app.add_option("--version", version);
  app.add_option("--namespace", ns);
  app.add_option("--wire", wire);
  app.add_option("--rv", rv);
  app.add_option("--seconds", seconds);
  app.add_option("--max-bytes", maxBytes);
  app.add_option("--limit", limit);
  app.add_flag("--list", list);
  app.add_option("--out", out)->required();
  CLI11_PARSE(app, argc, argv);

  auto cfg = defaultConfig();
  if (!cfg) {
    std::cerr << cfg.error().describe() << "\n";
    return 1;
  }
  auto client = Client::create(std::move(*cfg));
  if (!client) {
    std::cerr << client.error().describe() << "\n";
    return 1;
  }
  const Resource res = Resource::of(group, version, resource, ns);
  const Wire w = wire == "protobuf" ? Wire::kProtobuf : Wire::kJson;
  std::ofstream file(out, std::ios::binary);
  if (list) {
    ListOptions lo;
    lo.limit = limit;
    auto resp = (*client)->list(res, lo, w);
    if (!resp) {
      std::cerr << resp.error().describe() << "\n";
      return 1;
    }
    file << resp->body;
    std::cerr << "recorded " << resp->body.size() << " bytes (" << resp->contentType << ")\n";
    return 0;
  }
  WatchOptions wo;
  wo.resourceVersion = rv;
  wo.allowBookmarks = true;
  wo.timeoutSeconds = static_cast<int>(seconds) + 1;
  auto stream = (*client)->watch(res, wo, w);
  if (!stream) {
    std::cerr << stream.error().describe() << "\n";
    return 1;
  }
  std::cerr << "content type " << (*stream)->contentType() << "\n";
  WatchStream* s = stream->get();
  std::thread timer([s, seconds] {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    s->cancel();
  });
  size_t total = 0;
  for (;;) {
    auto bytes = s->read();
    if (!bytes || bytes->empty()) break;
    file.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    total += bytes->size();
    if (total >= maxBytes) break;
  }
  s->cancel();
  timer.join();
  std::cerr << "recorded " << total << " bytes\n";
  return 0;
}
