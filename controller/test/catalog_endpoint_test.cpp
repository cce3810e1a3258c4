// GET /options on hand-built snapshots (a state::Writer fed model objects),
// with the access review played by a stand-in for the API server's
// TokenReview/SubjectAccessReview (the real ones run in catalog_e2e_test).

#include "tally/controller/catalog_endpoint.hpp"

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/index.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace model::testing;

// Tokens "ok-NS" may order in NS; "bad" is not a valid token.
struct StandInReviewer final : AccessReviewer {
  int calls = 0;
  bool unreachable = false;
  Access review(std::string_view token, std::string_view ns) override {
    ++calls;
    if (unreachable) return {Access::Verdict::Unknown, "", "TokenReview failed: connection refused"};
    if (token == "bad") return {Access::Verdict::Unauthenticated, "", "the bearer token is not valid"};
    std::string user = "system:serviceaccount:" + std::string(token.substr(3)) + ":tenant";
    if (token == "ok-" + std::string(ns)) return {Access::Verdict::Allowed, user, ""};
    return {Access::Verdict::Forbidden, user,
            "user " + user + " may not create gpudevices.gpu.tally.dev in " + std::string(ns)};
  }
};

struct CatalogEndpoint : ::testing::Test {
  std::set<model::Kind> watched;
  std::unique_ptr<state::Writer> writer;
  StandInReviewer reviewer;

  void SetUp() override {
    build();
    put(passthroughClass());
    put(gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
    put(ns("acme"));
    put(ns("acme-ml", {"acme"}));
    auto quota = hrq("acme", "plan-quota", model::quotaKey(kH200), 3);
    put(quota);
  }
  void build() {
    state::Writer::Options o;
    o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
    o.watched = watched;
    writer = std::make_unique<state::Writer>(o);
  }
  template <class T>
  void put(T object) {
    writer->upsert(state::Object(std::move(object)));
  }
  runtime::http::Response get(std::string_view ns, std::string_view authorization) {
    writer->flush();
    return answerOptions(writer->snapshots(), reviewer, ns, authorization);
  }
};

TEST_F(CatalogEndpoint, AuthorizedCallerGetsTheCatalogueOfTheNamespace) {
  auto r = get("acme-ml", "Bearer ok-acme-ml");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.contentType, "application/json");
  EXPECT_NE(r.body.find(R"("namespace":"acme-ml")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("class":"h200")"), std::string::npos) << r.body;
  // The HRQ of the ancestor allows 3 of the 4 free on gpu-1.
  EXPECT_NE(r.body.find(R"("orderable":true,"largestCount":3)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("BudgetExceeded"), std::string::npos) << r.body;
}

TEST_F(CatalogEndpoint, MissingTokenIs401) {
  auto r = get("acme-ml", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("bearer token"), std::string::npos) << r.body;
  EXPECT_EQ(reviewer.calls, 0);
  EXPECT_EQ(get("acme-ml", "Basic dXNlcjpwYXNz").status, 401);
}

TEST_F(CatalogEndpoint, InvalidTokenIs401) {
  auto r = get("acme-ml", "Bearer bad");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("not valid"), std::string::npos) << r.body;
}

TEST_F(CatalogEndpoint, UserWithoutCreateInTheNamespaceIs403NamingUserAndNamespace) {
  auto r = get("acme", "Bearer ok-acme-ml");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("system:serviceaccount:acme-ml:tenant"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("in acme"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("largestCount"), std::string::npos) << r.body;
}

TEST_F(CatalogEndpoint, ReviewThatCannotBeMadeIs503) {
  reviewer.unreachable = true;
  auto r = get("acme-ml", "Bearer ok-acme-ml");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("TokenReview failed"), std::string::npos) << r.body;
}

TEST_F(CatalogEndpoint, NamespaceMissingIs400) { EXPECT_EQ(get("", "Bearer ok-acme-ml").status, 400); }

TEST_F(CatalogEndpoint, UnsyncedCacheIs503NamingTheCaches) {
  watched = {model::Kind::Pod, model::Kind::GpuDevice};
  build();
  auto r = get("acme-ml", "Bearer ok-acme-ml");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("Pod"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("GPUDevice"), std::string::npos) << r.body;
}

TEST(CachedAccessReviewer, RemembersDecisionsForTheTtlAndNotUnknownOnes) {
  StandInReviewer backend;
  auto now = std::chrono::steady_clock::time_point{};
  CachedAccessReviewer cached(backend, std::chrono::seconds(10), [&] { return now; });
  EXPECT_EQ(cached.review("ok-a", "a").verdict, Access::Verdict::Allowed);
  EXPECT_EQ(cached.review("ok-a", "a").verdict, Access::Verdict::Allowed);
  EXPECT_EQ(backend.calls, 1);
  EXPECT_EQ(cached.review("ok-a", "b").verdict, Access::Verdict::Forbidden);  // another namespace: its own decision
  EXPECT_EQ(backend.calls, 2);
  now += std::chrono::seconds(11);
  EXPECT_EQ(cached.review("ok-a", "a").verdict, Access::Verdict::Allowed);
  EXPECT_EQ(backend.calls, 3);
  backend.unreachable = true;
  EXPECT_EQ(cached.review("ok-c", "c").verdict, Access::Verdict::Unknown);
  EXPECT_EQ(cached.review("ok-c", "c").verdict, Access::Verdict::Unknown);
  EXPECT_EQ(backend.calls, 5);
}

}  // namespace
}  // namespace tally::controller
