#pragma once
// Organization CREATE and UPDATE reviews as the API server sends them, and a cluster of
// eight H200 devices with acme holding 3 of quota and using 3 (a running pod
// of 2 in acme-ml and a held device of 1): the Organization webhook's tests.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tally/model/testing/fixtures.hpp"
#include "tally/controller/organization_webhook.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/usage.hpp"

namespace tally::controller::org_review {

using namespace model::testing;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;

inline std::string orgJson(const std::string& addons, const std::string& name = "acme") {
  std::string escaped;
  for (char ch : addons) {
    if (ch == '"') escaped += '\\';
    escaped += ch;
  }
  return R"({"apiVersion":"kube-dc.com/v1","kind":"Organization","metadata":{"name":")" + name + R"(","namespace":")" +
         name +
         R"(",)"
         R"("annotations":{"billing.kube-dc.com/addons":")" +
         escaped + R"("}}})";
}

inline std::string addons(std::vector<std::pair<std::string, int>> list) {
  std::string out = "[";
  for (const auto& [id, q] : list) {
    out += (out.size() > 1 ? "," : "") + std::string(R"({"addonId":")") + id + R"(","quantity":)" + std::to_string(q) +
           "}";
  }
  return out + "]";
}

inline std::string reviewJson(const std::string& object, const std::string& oldObject, bool dryRun = false) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"kube-dc.com","version":"v1","kind":"Organization"},)"
         R"("resource":{"group":"kube-dc.com","version":"v1","resource":"organizations"},)"
         R"("name":"acme","namespace":"acme","operation":"UPDATE","userInfo":{"username":"admin"},"dryRun":)" +
         std::string(dryRun ? "true" : "false") + R"(,"object":)" + object + R"(,"oldObject":)" + oldObject + "}}";
}

// A CREATE of Organization `name` in namespace `name`: no oldObject.
inline std::string createReviewJson(const std::string& name, const std::string& object) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-2",)"
         R"("kind":{"group":"kube-dc.com","version":"v1","kind":"Organization"},)"
         R"("resource":{"group":"kube-dc.com","version":"v1","resource":"organizations"},)"
         R"("name":")" +
         name + R"(","namespace":")" + name +
         R"(","operation":"CREATE","userInfo":{"username":"admin"},"dryRun":false,"object":)" + object +
         R"(,"oldObject":null}})";
}

inline AdmissionRequest request(const std::string& review) {
  auto r = runtime::admission::decodeAdmissionReview(review);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return std::move(r).value();
}

inline bool refusedWith(const AdmissionResponse& r, std::string_view code) {
  return !r.allowed && r.message.starts_with("tally: ") &&
         r.message.find("[" + std::string(code) + "]") != std::string::npos;
}

inline model::Addon grantAddon(std::string id, bool selfService) {
  model::Addon a;
  a.id = std::move(id);
  a.selfService = selfService;
  a.gpu["h200"] = model::GpuGrant{1, 0, 0, 0};
  return a;
}

// Eight H200 devices (7 to sell), acme holding 3 through h200-quota, using 3:
// a running pod of 2 in acme-ml and a held device of 1.
struct OrganizationChanges : ::testing::Test {
  model::Cluster c = syncedCluster();
  const std::string key = model::quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", model::NodeMode::VmPassthrough, kH200, 4));
    c.plans->addons["h200-quota"] = grantAddon("h200-quota", true);
    c.plans->addons["h200-reserved"] = grantAddon("h200-reserved", false);
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, org("acme", {{"h200-quota", 3}}));
    put(c, hrq("acme", "plan-quota", key, 3));
    put(c, gpuPod("acme-ml", "trainer", kH200, 2, "gpu-1"));
    put(c, device("acme-ml", "held", "h200", 1, model::DevicePhase::Bound, "gpu-2"));
  }
  AdmissionResponse create(const std::string& name, std::vector<std::pair<std::string, int>> with) {
    model::TotalsCapacityView view(c, model::computeUsage(c));
    return reviewOrganization(c, view, request(createReviewJson(name, orgJson(addons(with), name))), {}).response;
  }
  AdmissionResponse change(std::vector<std::pair<std::string, int>> to, bool dryRun = false) {
    model::TotalsCapacityView view(c, model::computeUsage(c));
    return reviewOrganization(
               c, view, request(reviewJson(orgJson(addons(to)), orgJson(addons({{"h200-quota", 3}})), dryRun)), {})
        .response;
  }
};

}  // namespace tally::controller::org_review
