#pragma once
// The claim door's tests: a DRA pool on a state::Writer's snapshot, and
// AdmissionReviews of ResourceClaim CREATEs as the API server sends them.

#include <memory>
#include <string>

#include "tally/controller/claim_webhook.hpp"
#include "tally/model/testing/fixtures.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller::testing {

inline std::string claimJson(const std::string& ns, const std::string& name, const std::string& deviceClass,
                             int count) {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")" + name +
         R"(","namespace":")" + ns +
         R"("},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":")" + deviceClass +
         R"(","allocationMode":"ExactCount","count":)" + std::to_string(count) + "}}]}}}";
}

inline std::string claimReview(const std::string& ns, const std::string& name, const std::string& object,
                               bool dryRun = false, const std::string& operation = "CREATE") {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"},)"
         R"("resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceclaims"},)"
         R"("name":")" +
         name + R"(","namespace":")" + ns + R"(","operation":")" + operation +
         R"(","userInfo":{"username":"system:serviceaccount:kube-system:resource-claim-controller"},"dryRun":)" +
         (dryRun ? "true" : "false") + R"(,"object":)" + object + "}}";
}

// A writer holding one DRA pool: 4 devices on dra-1, tenants acme-org >
// acme with plan-quota `budget` on acme-org; `observer` hears it (the door).
inline std::unique_ptr<state::Writer> draPool(std::int64_t budget, state::Observer* observer = nullptr) {
  using namespace model::testing;
  state::Writer::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;
  if (observer) o.observers.push_back(observer);
  auto writer = std::make_unique<state::Writer>(o);
  auto put = [&](auto object) { writer->upsert(state::Object(std::move(object))); };
  put(draClass());
  put(draNode("dra-1"));
  put(draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  put(ns("acme-org"));
  put(ns("acme", {"acme-org"}));
  put(hrq("acme-org", "plan-quota", model::quotaKey(draClass().resourceName), budget));
  writer->flush();
  return writer;
}

}  // namespace tally::controller::testing
