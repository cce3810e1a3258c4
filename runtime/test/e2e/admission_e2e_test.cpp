// Admission webhooks against a real kube-apiserver: the API server calls the
// runtime's HTTPS webhook server at https://127.0.0.1:PORT, verifying it with
// the caBundle the CertificateKeeper injected; refusals reach the client with
// the handler's message, dry runs reach the handler flagged, a mutating
// webhook's JSONPatch lands on the object, and certificate rotation during a
// stream of creates fails none of them.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "tally/runtime/testing/e2e/cluster.hpp"
#include "tally/runtime/admission/certificate_keeper.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/runtime/config.hpp"
#include "tally/runtime/manager.hpp"

namespace tally::runtime::e2e {
namespace {

using namespace std::chrono_literals;
using namespace admission;

constexpr const char* kNamespace = "adm";
constexpr const char* kSecret = "webhook-tls";
const Resource kConfigMaps = Resource::core("configmaps", kNamespace);
const Resource kValidating = Resource::of("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations");
const Resource kMutating = Resource::of("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations");

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

std::string stringAt(const std::string& json, const char* pointer) {
  simdjson::padded_string padded(json);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  std::string_view v;
  if (parser.iterate(padded).get(doc) || doc.at_pointer(pointer).get_string().get(v)) return {};
  return std::string(v);
}

std::string configMap(const std::string& name, const std::string& verdict) {
  return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":)" + jsonString(name) +
         R"(,"labels":{"adm-test/webhook":"on","adm-test/verdict":)" + jsonString(verdict) + "}}}";
}

// One webhook configuration of each kind, without a caBundle: the keeper adds it.
std::string webhookConfiguration(const char* kind, const std::string& name, const std::string& url) {
  return R"({"apiVersion":"admissionregistration.k8s.io/v1","kind":")" + std::string(kind) +
         R"(","metadata":{"name":)" + jsonString(name) + R"(},"webhooks":[{"name":)" + jsonString(name + ".tally.dev") +
         R"(,"clientConfig":{"url":)" + jsonString(url) +
         R"(},"rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["configmaps"],)"
         R"("scope":"Namespaced"}],"objectSelector":{"matchLabels":{"adm-test/webhook":"on"}},)"
         R"("matchConditions":[{"name":"test-namespace","expression":"request.namespace == 'adm'"}],)"
         R"("failurePolicy":"Fail","sideEffects":"NoneOnDryRun","timeoutSeconds":5,"admissionReviewVersions":["v1"]}]})";
}

// The keeper on a Manager, the HTTPS server with both webhooks, and the two
// configurations pointing at it: built once for the whole suite.
struct Harness {
  std::shared_ptr<Client> client = Cluster::instance().client();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("adm-e2e-" + std::to_string(::getpid()));
  std::unique_ptr<CertificateKeeper> keeper;
  std::unique_ptr<Manager> manager;
  std::stop_source stop;
  std::jthread running;
  std::unique_ptr<http::Server> server;
  observability::Registry registry;
  std::shared_ptr<WebhookMetrics> metrics = std::make_shared<WebhookMetrics>(registry);
  std::mutex mu;
  std::set<std::string> dryRuns, reviewed;

  std::string objectName(const AdmissionRequest& r) {
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    std::string_view name;
    if (parser.iterate(r.object).get(doc) || doc.at_pointer("/metadata/name").get_string().get(name)) return r.name;
    return std::string(name);
  }

  AdmissionResponse validate(const AdmissionRequest& r) {
    const std::string name = objectName(r);
    {
      std::lock_guard lock(mu);
      (r.dryRun ? dryRuns : reviewed).insert(name);
    }
    simdjson::ondemand::parser parser;
    simdjson::ondemand::document doc;
    std::string_view verdict;
    if (parser.iterate(r.object).get(doc) ||
        doc.at_pointer("/metadata/labels/adm-test~1verdict").get_string().get(verdict)) {
      return AdmissionResponse::refuse(422, "configmap " + name + " has no adm-test/verdict label", "Invalid");
    }
    if (verdict == "refuse") {
      return AdmissionResponse::refuse(403, "configmap " + name + " refused: verdict label says refuse", "Forbidden");
    }
    return AdmissionResponse::allow();
  }

  bool start() {
    if (!client) return false;
    auto ns = client->create(Resource::core("namespaces"),
                             R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"adm"}})");
    if (!ns && !ns.error().is(ErrorCode::kAlreadyExists)) return false;
    CertificateKeeperOptions options;
    options.secretNamespace = kNamespace;
    options.secretName = kSecret;
    options.serviceName = "tally-webhook";
    options.serviceNamespace = kNamespace;
    options.ipAddresses = {"127.0.0.1"};
    options.validatingWebhookConfigurations = {"adm-validate"};
    options.mutatingWebhookConfigurations = {"adm-mutate"};
    options.directory = dir.string();
    options.bundlePropagation = 3s;
    options.caOverlap = 60s;
    keeper = std::make_unique<CertificateKeeper>(client, options);
    manager = std::make_unique<Manager>(client, ManagerOptions{});
    keeper->attach(*manager);
    running = std::jthread([this] { (void)manager->run(stop.get_token()); });
    if (!eventually([&] { return keeper->ready(); })) return false;

    http::Router router;
    WebhookOptions webhookOptions;
    webhookOptions.metrics = metrics;
    addWebhook(
        router, "/validate", "validate", [this](const AdmissionRequest& r) { return validate(r); }, webhookOptions);
    addWebhook(
        router, "/mutate", "mutate",
        [](const AdmissionRequest&) {
          JsonPatch patch;
          patch.add(JsonPatch::pointer({"metadata", "labels", "adm-test/mutated"}), "\"yes\"");
          return AdmissionResponse::mutate(std::move(patch));
        },
        webhookOptions);
    http::ServerOptions serverOptions;
    serverOptions.tls = keeper->tlsFiles();
    // Reviews only from the API server's client certificate (the cluster's
    // AdmissionConfiguration presents pki/webhook-client.crt).
    serverOptions.tls->clients =
        http::ClientCertificates{Cluster::instance().state() + "/pki/ca.crt", {"tally-webhook-client"}};
    serverOptions.tls->reloadCheckInterval = 0ms;
    // Kept-alive connections end soon, so the API server shakes hands again
    // (with the rotated certificate) during the rotation test.
    serverOptions.idleTimeout = 300ms;
    server = std::make_unique<http::Server>(serverOptions, std::move(router));
    server->start();
    const std::string base = "https://127.0.0.1:" + std::to_string(server->port());
    auto v = client->create(kValidating,
                            webhookConfiguration("ValidatingWebhookConfiguration", "adm-validate", base + "/validate"));
    auto m =
        client->create(kMutating, webhookConfiguration("MutatingWebhookConfiguration", "adm-mutate", base + "/mutate"));
    return v && m;
  }

  void shutdown() {
    (void)client->remove(kValidating, "adm-validate");
    (void)client->remove(kMutating, "adm-mutate");
    if (server) server->stop();
    stop.request_stop();
    if (running.joinable()) running.join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  std::string secretField(const char* key) {
    auto secret = client->get(Resource::core("secrets", kNamespace), kSecret);
    if (!secret) return {};
    auto decoded = base64Decode(stringAt(*secret, (std::string("/data/") + key).c_str()));
    return decoded ? std::move(decoded).value() : std::string();
  }
  std::string injectedBundle(const Resource& resource, const char* name) {
    auto config = client->get(resource, name);
    if (!config) return {};
    auto decoded = base64Decode(stringAt(*config, "/webhooks/0/clientConfig/caBundle"));
    return decoded ? std::move(decoded).value() : std::string();
  }
};

Harness* harness = nullptr;

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "adm-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(Cluster::instance().up(name)) << "e2e/cluster/up --name " << name << " failed";
    harness = new Harness;
    ASSERT_TRUE(harness->start()) << "keeper, webhook server or configurations did not come up";
    // The API server's view of the configurations lags their creation: wait
    // until an allowed create passes both webhooks.
    int n = 0;
    ASSERT_TRUE(eventually([&] {
      return bool(harness->client->create(kConfigMaps, configMap("warmup-" + std::to_string(n++), "allow")));
    })) << "the API server never admitted through the webhook";
  }
  void TearDown() override {
    if (harness) harness->shutdown();
    delete harness;
    Cluster::instance().down();
  }
};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

TEST(AdmissionE2E, KeeperCreatedTheTlsSecretAndInjectedItsCaIntoBothConfigurations) {
  auto secret = harness->client->get(Resource::core("secrets", kNamespace), kSecret);
  ASSERT_TRUE(secret) << secret.error().describe();
  EXPECT_EQ(stringAt(*secret, "/type"), "kubernetes.io/tls");
  const std::string ca = harness->secretField("ca.crt");
  const std::string crt = harness->secretField("tls.crt");
  ASSERT_FALSE(ca.empty());
  EXPECT_TRUE(signedBy(crt, ca));
  EXPECT_TRUE(keyMatches(crt, harness->secretField("tls.key")));
  EXPECT_EQ(harness->injectedBundle(kValidating, "adm-validate"), ca);
  EXPECT_EQ(harness->injectedBundle(kMutating, "adm-mutate"), ca);
  EXPECT_GE(harness->keeper->stats().bundleInjections, 2u) << "the test created both configurations without one";
  EXPECT_EQ(harness->keeper->stats().secretsCreated, 1u);
}

// What curl gets posting a forged review straight to the webhook: "STATUS BODY".
std::string forgedReview(const std::string& name, const std::string& clientCert) {
  const std::string pki = Cluster::instance().state() + "/pki/";
  const auto file = harness->dir / ("forged-" + name + ".json");
  {
    std::ofstream out(file);
    out << R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged-1",)"
        << R"("kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1",)"
        << R"("resource":"configmaps"},"namespace":"adm","operation":"CREATE","userInfo":{"username":"mallory"},)"
        << R"("object":)" << configMap(name, "allow") << "}}";
  }
  std::string cert;
  if (!clientCert.empty()) cert = " --cert " + pki + clientCert + ".crt --key " + pki + clientCert + ".key";
  return runCommand(
      "curl -sk --max-time 5 -o - -w ' %{http_code}' -H 'Content-Type: application/json' --data-binary @" +
      file.string() + cert + " https://127.0.0.1:" + std::to_string(harness->server->port()) + "/validate");
}

TEST(AdmissionE2E, ReviewsFromAnyoneButTheApiServerAreRefusedBeforeTheHandler) {
  // No client certificate: 401. The cluster's admin certificate (same CA,
  // another name): 403. Neither reaches the handler.
  const std::string anonymous = forgedReview("forged-anonymous", "");
  EXPECT_NE(anonymous.find(" 401"), std::string::npos) << anonymous;
  const std::string admin = forgedReview("forged-admin", "admin");
  EXPECT_NE(admin.find(" 403"), std::string::npos) << admin;
  EXPECT_NE(admin.find("tally-e2e-admin"), std::string::npos) << admin;
  // The API server's own certificate is answered (what the API server does through its configuration).
  const std::string apiserver = forgedReview("forged-as-apiserver", "webhook-client");
  EXPECT_NE(apiserver.find(" 200"), std::string::npos) << apiserver;
  std::lock_guard lock(harness->mu);
  EXPECT_EQ(harness->reviewed.count("forged-anonymous"), 0u);
  EXPECT_EQ(harness->reviewed.count("forged-admin"), 0u);
  EXPECT_EQ(harness->reviewed.count("forged-as-apiserver"), 1u);
}

TEST(AdmissionE2E, RefusedCreateReturnsTheHandlersMessageToTheClient) {
  auto refused = harness->client->create(kConfigMaps, configMap("refused-1", "refuse"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().httpStatus, 403);
  EXPECT_NE(refused.error().message.find("configmap refused-1 refused: verdict label says refuse"), std::string::npos)
      << refused.error().describe();
  EXPECT_EQ(harness->client->get(kConfigMaps, "refused-1").error().code, ErrorCode::kNotFound);
  // As a user sees it.
  const auto file = harness->dir / "refused-2.json";
  {
    std::ofstream out(file);
    out << configMap("refused-2", "refuse");
  }
  int rc = 0;
  const std::string out = Cluster::instance().kubectl("-n adm create -f " + file.string(), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("denied the request: configmap refused-2 refused: verdict label says refuse"), std::string::npos)
      << out;
}

TEST(AdmissionE2E, AllowedCreateSucceedsAndCarriesTheMutatingPatch) {
  auto created = harness->client->create(kConfigMaps, configMap("allowed-1", "allow"));
  ASSERT_TRUE(created) << created.error().describe();
  auto got = harness->client->get(kConfigMaps, "allowed-1");
  ASSERT_TRUE(got);
  EXPECT_EQ(stringAt(*got, "/metadata/labels/adm-test~1mutated"), "yes");
  std::lock_guard lock(harness->mu);
  EXPECT_EQ(harness->reviewed.count("allowed-1"), 1u);
}

TEST(AdmissionE2E, DryRunCreateReachesTheHandlerFlaggedAndLeavesNothing) {
  HttpRequest request;
  request.method = "POST";
  request.target = kConfigMaps.collectionPath() + "?dryRun=All";
  request.body = configMap("dry-1", "allow");
  request.contentType = "application/json";
  auto sent = harness->client->send(request);
  ASSERT_TRUE(sent) << sent.error().describe();
  EXPECT_EQ(stringAt(sent->body, "/metadata/labels/adm-test~1mutated"), "yes") << "the dry run shows the patch";
  EXPECT_EQ(harness->client->get(kConfigMaps, "dry-1").error().code, ErrorCode::kNotFound);
  std::lock_guard lock(harness->mu);
  EXPECT_EQ(harness->dryRuns.count("dry-1"), 1u);
  EXPECT_EQ(harness->reviewed.count("dry-1"), 0u);
}

TEST(AdmissionE2E, RotationsDuringAStreamOfCreatesFailNoAdmission) {
  const std::string oldCa = harness->secretField("ca.crt");
  const std::string oldCrt = harness->secretField("tls.crt");
  const auto reloadsBefore = harness->server->certificateStats().reloads;
  std::atomic<bool> done{false};
  std::atomic<int> created{0};
  std::vector<std::string> failures;
  std::jthread stream([&] {
    for (int i = 0; !done.load(); ++i) {
      auto r = harness->client->create(kConfigMaps, configMap("stream-" + std::to_string(i), "allow"));
      if (r) {
        created.fetch_add(1);
      } else {
        failures.push_back(r.error().describe());
      }
      // Pauses past the server's idle timeout: the API server reconnects.
      std::this_thread::sleep_for(i % 10 == 9 ? 400ms : 20ms);
    }
  });
  std::this_thread::sleep_for(1s);

  // A CA rotation in two steps, then a serving certificate rotation alone.
  harness->keeper->forceRotation(true);
  ASSERT_TRUE(eventually([&] {
    const std::string crt = harness->secretField("tls.crt");
    const std::string ca = harness->secretField("ca.crt");
    return crt != oldCrt && !signedBy(crt, oldCa) && splitCertificates(ca).size() == 2 &&
           signedBy(crt, splitCertificates(ca).front());
  })) << "the serving certificate was not reissued by a new CA";
  const std::string bundle = harness->secretField("ca.crt");
  EXPECT_EQ(splitCertificates(bundle)[1], splitCertificates(oldCa)[0]) << "the old CA stays in the bundle";
  EXPECT_TRUE(eventually([&] { return harness->injectedBundle(kValidating, "adm-validate") == bundle; }));
  EXPECT_TRUE(eventually([&] { return harness->server->certificateStats().reloads > reloadsBefore; }));
  std::this_thread::sleep_for(2s);
  const std::string caRotatedCrt = harness->secretField("tls.crt");
  harness->keeper->forceRotation(false);
  ASSERT_TRUE(eventually([&] { return harness->secretField("tls.crt") != caRotatedCrt; }));
  EXPECT_TRUE(eventually([&] { return harness->server->certificateStats().reloads > reloadsBefore + 1; }));
  std::this_thread::sleep_for(2s);
  done.store(true);
  stream.join();

  EXPECT_TRUE(failures.empty()) << failures.size() << " failed admissions, first: " << failures.front();
  EXPECT_GE(created.load(), 50);
  const auto stats = harness->keeper->stats();
  EXPECT_EQ(stats.caRotations, 1u);
  EXPECT_GE(stats.servingRotations, 2u);
  EXPECT_EQ(harness->server->certificateStats().failures, 0u);
  EXPECT_EQ(harness->metrics->requests("validate", Operation::kCreate, "error").value(), 0u);
}

}  // namespace
}  // namespace tally::runtime::e2e
