// Serving certificates: a CA, a serving certificate it signs for the
// Service's names, their validity and when they rotate.

#include "tally/runtime/admission/certificates.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <memory>

namespace tally::runtime::admission {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<X509, decltype(&X509_free)> parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return {cert, X509_free};
}

TEST(ServiceDnsNames, AllFourForms) {
  EXPECT_EQ(serviceDnsNames("tally-webhook", "tally-system"),
            (std::vector<std::string>{"tally-webhook", "tally-webhook.tally-system", "tally-webhook.tally-system.svc",
                                      "tally-webhook.tally-system.svc.cluster.local"}));
}

class Issued : public ::testing::TestWithParam<KeyAlgorithm> {};

TEST_P(Issued, ServingCertificateIsSignedByTheCaForTheServiceNamesAndIp) {
  CaRequest caRequest;
  caRequest.key = GetParam();
  caRequest.validity = 48h;
  auto ca = makeCa(caRequest);
  ASSERT_TRUE(ca) << ca.error().describe();
  ServingRequest request;
  request.commonName = "tally-webhook";
  request.dnsNames = serviceDnsNames("tally-webhook", "tally-system");
  request.ipAddresses = {"127.0.0.1"};
  request.validity = 24h;
  request.key = GetParam();
  auto serving = issueServingCertificate(*ca, request);
  ASSERT_TRUE(serving) << serving.error().describe();

  EXPECT_TRUE(signedBy(serving->certPem, ca->certPem));
  EXPECT_TRUE(signedBy(ca->certPem, ca->certPem)) << "the CA is self-signed";
  EXPECT_TRUE(keyMatches(serving->certPem, serving->keyPem));
  EXPECT_FALSE(keyMatches(serving->certPem, ca->keyPem));

  auto other = makeCa(caRequest);
  ASSERT_TRUE(other);
  EXPECT_FALSE(signedBy(serving->certPem, other->certPem));

  auto leaf = parse(serving->certPem);
  auto root = parse(ca->certPem);
  ASSERT_TRUE(leaf && root);
  EXPECT_EQ(X509_check_host(leaf.get(), "tally-webhook.tally-system.svc", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(leaf.get(), "tally-webhook.tally-system.svc.cluster.local", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(leaf.get(), "other.tally-system.svc", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(leaf.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ca(root.get()), 1);
  EXPECT_EQ(X509_check_ca(leaf.get()), 0);
  EXPECT_EQ(X509_check_purpose(leaf.get(), X509_PURPOSE_SSL_SERVER, 0), 1);

  // A chain verification as a client does it, with the CA as the only trust.
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), root.get());
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), nullptr);
  EXPECT_EQ(X509_verify_cert(ctx.get()), 1) << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));

  auto validity = readValidity(serving->certPem);
  ASSERT_TRUE(validity);
  const auto now = std::chrono::system_clock::now();
  EXPECT_LE(validity->notBefore, now - 4min) << "backdated for clock skew";
  EXPECT_GE(validity->notBefore, now - 6min);
  EXPECT_NEAR(std::chrono::duration<double>(validity->notAfter - now).count(), 24 * 3600.0, 5.0);
}

INSTANTIATE_TEST_SUITE_P(Keys, Issued, ::testing::Values(KeyAlgorithm::kEcdsaP256, KeyAlgorithm::kRsa2048));

TEST(IssueServingCertificate, AShortLifetimeIsBackdatedLessSoItsRotationPointIsAhead) {
  auto ca = makeCa({});
  ASSERT_TRUE(ca);
  ServingRequest request;
  request.commonName = "svc";
  request.dnsNames = {"svc"};
  request.validity = std::chrono::seconds(30);
  auto serving = issueServingCertificate(*ca, request);
  ASSERT_TRUE(serving) << serving.error().describe();
  auto validity = readValidity(serving->certPem);
  ASSERT_TRUE(validity);
  const auto now = std::chrono::system_clock::now();
  EXPECT_LE(validity->notBefore, now - 2s);
  EXPECT_GE(validity->notBefore, now - 5s);
  EXPECT_GT(rotationDue(*validity, 2.0 / 3.0), now + 10s) << "rotation would be due at once";
}

TEST(IssueServingCertificate, NeedsANameAndAReadableCa) {
  auto ca = makeCa({});
  ASSERT_TRUE(ca);
  auto nameless = issueServingCertificate(*ca, {});
  ASSERT_FALSE(nameless);
  EXPECT_NE(nameless.error().message.find("no DNS name"), std::string::npos);
  ServingRequest request;
  request.dnsNames = {"svc"};
  auto broken = issueServingCertificate({"not pem", "not pem"}, request);
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find("not readable PEM"), std::string::npos);
}

TEST(RotationDue, AfterTwoThirdsOfTheLifetime) {
  const auto start = std::chrono::system_clock::time_point(std::chrono::hours(1000));
  Validity v{start, start + 90h};
  EXPECT_EQ(rotationDue(v), start + 60h);
  EXPECT_EQ(rotationDue(v, 0.5), start + 45h);
}

TEST(ReadValidity, RefusesWhatIsNotACertificate) {
  auto r = readValidity("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a PEM certificate"), std::string::npos);
}

TEST(SplitCertificates, EveryBlockInOrder) {
  auto a = makeCa({});
  auto b = makeCa({});
  ASSERT_TRUE(a && b);
  auto parts = splitCertificates(a->certPem + b->certPem);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], a->certPem);
  EXPECT_EQ(parts[1], b->certPem);
  EXPECT_TRUE(splitCertificates("junk").empty());
}

}  // namespace
}  // namespace tally::runtime::admission
