#pragma once
// Where the API server is and how to authenticate: from a kubeconfig file
// (current context) or from the in-cluster service account.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tally/runtime/result.hpp"

namespace tally::runtime {

// Supplies the bearer token; a file-backed source re-reads the file so a
// rotated service-account token is picked up without a restart.
class TokenSource {
 public:
  static std::shared_ptr<TokenSource> fixed(std::string token);
  static std::shared_ptr<TokenSource> file(std::filesystem::path path,
                                           std::chrono::seconds refresh = std::chrono::seconds(60));
  Result<std::string> token();

 private:
  std::mutex mu_;
  std::string token_;
  std::filesystem::path path_;
  std::chrono::seconds refresh_{0};
  std::chrono::steady_clock::time_point readAt_{};
  bool fromFile_ = false;
};

struct ClusterConfig {
  std::string host;  // DNS name or IP (no brackets)
  std::string port = "443";
  std::string basePath;  // path prefix of the server URL, usually empty
  std::string caPem;     // empty: system trust store
  std::string clientCertPem;
  std::string clientKeyPem;
  std::shared_ptr<TokenSource> token;  // null: no bearer token
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;  // overrides SNI / verified name when set
  std::string defaultNamespace = "default";
  std::chrono::milliseconds connectTimeout{10'000};
  std::chrono::milliseconds requestTimeout{30'000};
  std::string userAgent = "tally-runtime/0.1";
};

// Parses a kubeconfig document. `baseDir` resolves relative file references.
Result<ClusterConfig> parseKubeconfig(const std::string& yaml, const std::filesystem::path& baseDir,
                                      const std::string& contextOverride = {});
// The same, with `files` reading the files the document names
// (certificate-authority, client-certificate, client-key; a tokenFile is read
// only when the token is asked for), so that a caller may serve them without
// the file system (the fuzz target, runtime/fuzz/kubeconfig_fuzz.cpp).
using KubeconfigFileReader = std::function<Result<std::string>(const std::filesystem::path&)>;
Result<ClusterConfig> parseKubeconfig(const std::string& yaml, const std::filesystem::path& baseDir,
                                      const std::string& contextOverride, const KubeconfigFileReader& files);
Result<ClusterConfig> loadKubeconfig(const std::filesystem::path& path, const std::string& contextOverride = {});

struct InClusterPaths {
  std::filesystem::path dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};
// Uses KUBERNETES_SERVICE_HOST/PORT and the mounted token, CA and namespace.
Result<ClusterConfig> inClusterConfig(const InClusterPaths& paths = {});

// $KUBECONFIG (first entry), then in-cluster, then ~/.kube/config.
Result<ClusterConfig> defaultConfig();

// A kubeconfig's server URL, "https://host:port/prefix", in the pieces a
// ClusterConfig keeps (port "443" when none is given, no trailing '/').
struct ServerUrl {
  std::string host;  // no brackets around an IPv6 address
  std::string port;
  std::string basePath;
};
Result<ServerUrl> parseServerUrl(std::string_view url);

// Standard base64 (whitespace skipped, '=' ends it); the error names the first
// byte outside the alphabet and where it is.
Result<std::string> base64Decode(std::string_view in);

}  // namespace tally::runtime
