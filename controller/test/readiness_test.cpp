#include "tally/controller/readiness.hpp"

#include <gtest/gtest.h>

#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

TEST(Readiness, ReadyOnlyWithCachesSyncedAndTheCertificateServed) {
  state::Writer synced(state::Writer::Options{});
  auto r = readiness(*synced.snapshots().read(), {true, true});
  EXPECT_TRUE(r.ready) << r.reason;
}

TEST(Readiness, NamesTheUnsyncedCachesAndTheMissingCertificate) {
  state::Writer::Options o;
  o.watched = {model::Kind::GpuDevice};
  state::Writer writer(o);
  auto r = readiness(*writer.snapshots().read(), {false, false});
  EXPECT_FALSE(r.ready);
  EXPECT_NE(r.reason.find("GPUDevice cache is not synced"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("serving certificate is not loaded"), std::string::npos) << r.reason;
}

TEST(Readiness, ACertificateNotYetServedIsNotReady) {
  state::Writer synced(state::Writer::Options{});
  auto r = readiness(*synced.snapshots().read(), {true, false});
  EXPECT_FALSE(r.ready);
  EXPECT_NE(r.reason.find("not listening"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace tally::controller
