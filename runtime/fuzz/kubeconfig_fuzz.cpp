// libFuzzer target: arbitrary bytes as a kubeconfig (yaml-cpp, then the
// current context's cluster and user), as loadKubeconfig reads the file
// --kubeconfig or $KUBECONFIG names. The files it names are served from
// memory: a name ending in "missing" cannot be read, any other holds a PEM.
// A first line "#context: <name>" selects a context, as --context does.
// What parses must hold together: a host and a port, a certificate with its
// key. Seeds: runtime/fuzz/kubeconfig-corpus.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tally/runtime/config.hpp"

using namespace tally::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(bytes), size);
  std::string context;
  if (constexpr std::string_view kContext = "#context: "; yaml.starts_with(kContext)) {
    context = yaml.substr(kContext.size(), yaml.find('\n') - kContext.size());
  }
  auto files = [](const std::filesystem::path& path) -> Result<std::string> {
    if (path.string().ends_with("missing")) return Error(ErrorCode::kConfig, "cannot read " + path.string());
    return "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" + path.filename().string();
  };
  auto cfg = parseKubeconfig(yaml, "/etc/tally", context, files);
  if (!cfg) {
    if (cfg.error().message.empty()) __builtin_trap();  // a refusal names its reason
    return 0;
  }
  if (cfg->host.empty() || cfg->port.empty()) __builtin_trap();
  if (cfg->clientCertPem.empty() != cfg->clientKeyPem.empty()) __builtin_trap();
  if (!cfg->basePath.empty() && cfg->basePath.back() == '/') __builtin_trap();
  return 0;
}
