#include "tally/runtime/config.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace tally::runtime {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("tally-config-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& content) const { std::ofstream(path_ / name) << content; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

constexpr const char* kKubeconfig = R"(
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: local, user: admin, namespace: team-a}
- name: other
  context: {cluster: remote, user: robot}
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0EtUEVN
- name: remote
  cluster:
    server: https://api.example.com/prefix/
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: robot
  user:
    tokenFile: robot.token
)";

TEST(Kubeconfig, CurrentContextSelectsClusterUserAndNamespace) {
  auto cfg = parseKubeconfig(kKubeconfig, "/nonexistent");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->host, "127.0.0.1");
  EXPECT_EQ(cfg->port, "6443");
  EXPECT_EQ(cfg->caPem, "CA-PEM");
  EXPECT_EQ(cfg->clientCertPem, "CERT");
  EXPECT_EQ(cfg->clientKeyPem, "KEY");
  EXPECT_EQ(cfg->defaultNamespace, "team-a");
  EXPECT_FALSE(cfg->insecureSkipTlsVerify);
  EXPECT_EQ(cfg->token, nullptr);
}

TEST(Kubeconfig, TokenFileIsResolvedRelativeToTheKubeconfigAndReread) {
  TempDir dir;
  dir.write("robot.token", "first\n");
  auto cfg = parseKubeconfig(kKubeconfig, dir.path(), "other");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->host, "api.example.com");
  EXPECT_EQ(cfg->port, "443");
  EXPECT_EQ(cfg->basePath, "/prefix");
  EXPECT_TRUE(cfg->insecureSkipTlsVerify);
  ASSERT_NE(cfg->token, nullptr);
  EXPECT_EQ(*cfg->token->token(), "first");
}

TEST(Kubeconfig, MissingPiecesAreConfigErrors) {
  EXPECT_EQ(parseKubeconfig("current-context: nope\ncontexts: []\n", ".").error().code, ErrorCode::kConfig);
  EXPECT_EQ(parseKubeconfig(": : :\n  - [", ".").error().code, ErrorCode::kConfig);
  auto badUrl = parseKubeconfig(
      "current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\nclusters: [{name: k, cluster: {server: "
      "'http://plain:80'}}]\n",
      ".");
  EXPECT_FALSE(badUrl);
}

TEST(ServerUrl, ParsesIpv6AndDefaultPortAndKeepsThePathPrefix) {
  auto v6 = parseServerUrl("https://[::1]:8443");
  ASSERT_TRUE(v6) << v6.error().describe();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "8443");
  auto named = parseServerUrl("https://kubernetes.default.svc/prefix/");
  ASSERT_TRUE(named) << named.error().describe();
  EXPECT_EQ(named->host, "kubernetes.default.svc");
  EXPECT_EQ(named->port, "443");
  EXPECT_EQ(named->basePath, "/prefix");
}

TEST(ServerUrl, RefusalsQuoteTheUrl) {
  for (const char* bad : {"http://plain:80", "https://[::1:8443", "https://:443", "https://host:"}) {
    auto parsed = parseServerUrl(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::kConfig);
    EXPECT_NE(parsed.error().describe().find(std::string("\"") + bad + "\""), std::string::npos)
        << parsed.error().describe();
  }
}

TEST(InCluster, ReadsMountedServiceAccountAndPicksUpARotatedToken) {
  TempDir dir;
  dir.write("token", "t1");
  dir.write("ca.crt", "CA");
  dir.write("namespace", "tally-system");
  ::setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = inClusterConfig(InClusterPaths{dir.path()});
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(cfg) << cfg.error().describe();
  EXPECT_EQ(cfg->host, "10.0.0.1");
  EXPECT_EQ(cfg->defaultNamespace, "tally-system");
  EXPECT_EQ(*cfg->token->token(), "t1");

  auto rotating = TokenSource::file(dir.path() / "token", std::chrono::seconds(0));
  EXPECT_EQ(*rotating->token(), "t1");
  dir.write("token", "t2");
  EXPECT_EQ(*rotating->token(), "t2");
}

TEST(Base64, DecodesAndRejectsGarbageNamingTheByteAndItsOffset) {
  auto decoded = base64Decode("aGVsbG8g\nd29ybGQ=");
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(*decoded, "hello world");
  auto garbage = base64Decode("aGV!!!");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().describe().find("byte 33 at offset 3"), std::string::npos) << garbage.error().describe();
}

}  // namespace
}  // namespace tally::runtime
