#pragma once
// Self-signed serving certificates made in the test (OpenSSL's C API), so no
// key is checked in.

#include <filesystem>
#include <string>

namespace tally::runtime::http::testing {

struct TestCertificate {
  std::string certPem;
  std::string keyPem;
};

// An ECDSA P-256 certificate for `commonName` with this serial, valid for a day.
TestCertificate makeCertificate(const std::string& commonName, long serial);

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
