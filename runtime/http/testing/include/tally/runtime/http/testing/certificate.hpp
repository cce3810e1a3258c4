#pragma once
// Self-signed serving certificates made in the test (OpenSSL's C API), so no
// key is checked in.

#include <filesystem>
#include <string>
#include <vector>

namespace tally::runtime::http::testing {

struct TestCertificate {
  std::string certPem;
  std::string keyPem;
};

// An ECDSA P-256 certificate for `commonName` with this serial, valid for a day.
TestCertificate makeCertificate(const std::string& commonName, long serial);

// A CA certificate (basicConstraints CA:TRUE) for signing the next ones.
TestCertificate makeCa(const std::string& commonName);

enum class Use { Client, Server };
// A certificate for `commonName` (and these DNS subjectAltNames) signed by
// `ca`, with the extended key usage for `use`.
TestCertificate makeSignedCertificate(const TestCertificate& ca, const std::string& commonName, Use use,
                                      const std::vector<std::string>& dnsNames = {});

// Replaces `path` with `content` in one rename, as a Secret volume's update
// does (the file gets a new inode).
void replaceFile(const std::filesystem::path& path, const std::string& content);

// A directory under the temporary one, removed with the object.
struct TempDir {
  TempDir();
  ~TempDir();
  std::filesystem::path path;
};

}  // namespace tally::runtime::http::testing
