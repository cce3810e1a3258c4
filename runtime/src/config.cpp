#include "tally/runtime/config.hpp"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tally::runtime {
namespace {

Result<std::string> readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kConfig, "cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path resolve(const std::filesystem::path& base, const std::string& p) {
  std::filesystem::path path(p);
  return path.is_absolute() ? path : base / path;
}

// Finds the entry named `name` in a kubeconfig list (clusters/users/contexts).
YAML::Node findNamed(const YAML::Node& list, const std::string& name, const char* field) {
  if (!list || !list.IsSequence()) return {};
  for (const auto& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>() == name) return entry[field];
  }
  return {};
}

std::string str(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// Reads either inline base64 `<key>-data` or the file named by `<key>`.
Result<std::string> pemFrom(const YAML::Node& n, const std::string& key, const std::filesystem::path& baseDir,
                            const KubeconfigFileReader& files) {
  if (std::string data = str(n, (key + "-data").c_str()); !data.empty()) {
    auto pem = base64Decode(data);
    if (!pem) return std::move(pem).error().withContext(key + "-data");
    return pem;
  }
  if (std::string file = str(n, key.c_str()); !file.empty()) return files(resolve(baseDir, file));
  return std::string();
}

}  // namespace

std::shared_ptr<TokenSource> TokenSource::fixed(std::string token) {
  auto src = std::make_shared<TokenSource>();
  src->token_ = std::move(token);
  return src;
}

std::shared_ptr<TokenSource> TokenSource::file(std::filesystem::path path, std::chrono::seconds refresh) {
  auto src = std::make_shared<TokenSource>();
  src->path_ = std::move(path);
  src->refresh_ = refresh;
  src->fromFile_ = true;
  return src;
}

Result<std::string> TokenSource::token() {
  std::lock_guard lock(mu_);
  if (!fromFile_) return token_;
  const auto now = std::chrono::steady_clock::now();
  if (token_.empty() || now - readAt_ >= refresh_) {
    auto content = readFile(path_);
    if (!content) {
      if (!token_.empty()) return token_;  // keep the last good token
      return std::move(content).error();
    }
    std::string t = std::move(*content);
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    token_ = std::move(t);
    readAt_ = now;
  }
  return token_;
}

Result<std::string> base64Decode(std::string_view in) {
  static constexpr auto table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '=') break;
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    const int8_t v = table[static_cast<unsigned char>(c)];
    if (v < 0) {
      return Error(ErrorCode::kConfig, "not valid base64: byte " + std::to_string(static_cast<unsigned char>(c)) +
                                           " at offset " + std::to_string(i) + " is outside the alphabet");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

Result<ServerUrl> parseServerUrl(std::string_view url) {
  const std::string text(url);
  constexpr std::string_view kScheme = "https://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error(ErrorCode::kConfig, "server URL \"" + text + "\" is not https://");
  }
  ServerUrl out;
  url.remove_prefix(kScheme.size());
  const auto slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  out.basePath = slash == std::string_view::npos ? "" : std::string(url.substr(slash));
  while (!out.basePath.empty() && out.basePath.back() == '/') out.basePath.pop_back();
  out.port = "443";
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return Error(ErrorCode::kConfig, "server URL \"" + text + "\" has an IPv6 address without its ']'");
    }
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      out.port = std::string(authority.substr(close + 2));
    }
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) out.port = std::string(authority.substr(colon + 1));
  }
  if (out.host.empty() || out.port.empty()) {
    return Error(ErrorCode::kConfig, "server URL \"" + text + "\" has no host or port");
  }
  return out;
}

Result<ClusterConfig> parseKubeconfig(const std::string& yaml, const std::filesystem::path& baseDir,
                                      const std::string& contextOverride) {
  return parseKubeconfig(yaml, baseDir, contextOverride, readFile);
}

Result<ClusterConfig> parseKubeconfig(const std::string& yaml, const std::filesystem::path& baseDir,
                                      const std::string& contextOverride, const KubeconfigFileReader& files) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Error(ErrorCode::kConfig, std::string("kubeconfig is not valid YAML: ") + e.what());
  }
  try {
    const std::string contextName = contextOverride.empty() ? str(root, "current-context") : contextOverride;
    if (contextName.empty()) return Error(ErrorCode::kConfig, "kubeconfig has no current-context");
    const YAML::Node context = findNamed(root["contexts"], contextName, "context");
    if (!context) return Error(ErrorCode::kConfig, "context " + contextName + " not found");
    const std::string clusterName = str(context, "cluster");
    const YAML::Node cluster = findNamed(root["clusters"], clusterName, "cluster");
    if (!cluster) return Error(ErrorCode::kConfig, "cluster " + clusterName + " not found");
    ClusterConfig cfg;
    auto server = parseServerUrl(str(cluster, "server"));
    if (!server) return std::move(server).error().withContext("cluster " + clusterName);
    cfg.host = std::move(server->host);
    cfg.port = std::move(server->port);
    cfg.basePath = std::move(server->basePath);
    if (std::string ns = str(context, "namespace"); !ns.empty()) cfg.defaultNamespace = ns;
    cfg.insecureSkipTlsVerify = str(cluster, "insecure-skip-tls-verify") == "true";
    cfg.tlsServerName = str(cluster, "tls-server-name");
    auto ca = pemFrom(cluster, "certificate-authority", baseDir, files);
    if (!ca) return std::move(ca).error();
    cfg.caPem = std::move(*ca);

    const std::string userName = str(context, "user");
    const YAML::Node user = findNamed(root["users"], userName, "user");
    if (user) {
      auto cert = pemFrom(user, "client-certificate", baseDir, files);
      if (!cert) return std::move(cert).error();
      auto key = pemFrom(user, "client-key", baseDir, files);
      if (!key) return std::move(key).error();
      cfg.clientCertPem = std::move(*cert);
      cfg.clientKeyPem = std::move(*key);
      if (std::string token = str(user, "token"); !token.empty()) {
        cfg.token = TokenSource::fixed(token);
      } else if (std::string file = str(user, "tokenFile"); !file.empty()) {
        cfg.token = TokenSource::file(resolve(baseDir, file));
      }
      if (user["exec"] || user["auth-provider"]) {
        return Error(ErrorCode::kConfig, "user " + userName + ": exec/auth-provider credentials are not supported");
      }
    } else if (!userName.empty()) {
      return Error(ErrorCode::kConfig, "user " + userName + " not found");
    }
    if (cfg.clientCertPem.empty() != cfg.clientKeyPem.empty()) {
      return Error(ErrorCode::kConfig, "client certificate and key must be given together");
    }
    return cfg;
  } catch (const YAML::Exception& e) {
    return Error(ErrorCode::kConfig, std::string("kubeconfig has an unexpected shape: ") + e.what());
  }
}

Result<ClusterConfig> loadKubeconfig(const std::filesystem::path& path, const std::string& contextOverride) {
  auto content = readFile(path);
  if (!content) return std::move(content).error();
  auto cfg = parseKubeconfig(*content, path.parent_path(), contextOverride);
  if (!cfg) return std::move(cfg).error().withContext(path.string());
  return cfg;
}

Result<ClusterConfig> inClusterConfig(const InClusterPaths& paths) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !port || !*host || !*port) {
    return Error(ErrorCode::kConfig, "not in a cluster: KUBERNETES_SERVICE_HOST/PORT unset");
  }
  ClusterConfig cfg;
  cfg.host = host;
  cfg.port = port;
  auto ca = readFile(paths.dir / "ca.crt");
  if (!ca) return std::move(ca).error();
  cfg.caPem = std::move(*ca);
  cfg.token = TokenSource::file(paths.dir / "token");
  if (auto tok = cfg.token->token(); !tok) return std::move(tok).error();
  if (auto ns = readFile(paths.dir / "namespace"); ns && !ns->empty()) cfg.defaultNamespace = *ns;
  return cfg;
}

Result<ClusterConfig> defaultConfig() {
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string first(env);
    first = first.substr(0, first.find(':'));
    return loadKubeconfig(first);
  }
  if (auto cfg = inClusterConfig(); cfg) return cfg;
  if (const char* home = std::getenv("HOME")) return loadKubeconfig(std::filesystem::path(home) / ".kube/config");
  return Error(ErrorCode::kConfig, "no kubeconfig and not in a cluster");
}

}  // namespace tally::runtime
