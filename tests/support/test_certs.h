#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"

namespace conduit::testing {

// A certificate and its private key, as PEM file paths.
struct CertKeyFiles {
  std::string cert;
  std::string key;
};

// The TLS material `make certs` makes, generated at test time by the same script
// (scripts/make-certs.sh, which runs the openssl CLI) so that no key is checked in: a CA, a
// server certificate for 127.0.0.1, ::1 and localhost, a client with URI SAN
// spiffe://conduit.dev/worker and a CN-only client (CN operator).
struct TestCertSet {
  std::string dir;
  std::string ca;  // the CA certificate (PEM)
  CertKeyFiles server;
  CertKeyFiles worker;     // URI SAN spiffe://conduit.dev/worker, CN conduit-worker
  CertKeyFiles operator_;  // CN operator, no SAN
};

// Runs scripts/make-certs.sh into `dir` (created; the CA's name ends with the directory's
// name, so two sets made into differently named directories have distinct CAs). The script is
// found through CONDUIT_SOURCE_DIR (set by CTest). INTERNAL with the script's output when it
// fails, FAILED_PRECONDITION when CONDUIT_SOURCE_DIR is unset.
inline absl::StatusOr<TestCertSet> MakeTestCerts(const std::string& dir) {
  const char* source = std::getenv("CONDUIT_SOURCE_DIR");
  if (source == nullptr) {
    return absl::FailedPreconditionError("CONDUIT_SOURCE_DIR is unset (CTest sets it)");
  }
  const std::string log = dir + ".make-certs.log";
  const int status =
      RunCommand({absl::StrCat(source, "/scripts/make-certs.sh"), dir, "--force"}, log);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::stringstream out;
    out << in.rdbuf();
    return absl::InternalError(absl::StrCat("make-certs.sh ", dir, " failed: ", out.str()));
  }
  std::remove(log.c_str());
  auto pair = [&](const std::string& stem) {
    return CertKeyFiles{dir + "/" + stem + ".pem", dir + "/" + stem + ".key"};
  };
  return TestCertSet{dir, dir + "/ca.pem", pair("server"), pair("worker"), pair("operator")};
}

// The content of a (small) file; empty when it cannot be read.
inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// Replaces `to` with a copy of `from` atomically: written whole to a temporary file beside `to`,
// then renamed over it (how certificate files are to be rotated). Returns whether it worked.
inline bool ReplaceFileAtomically(const std::string& from, const std::string& to) {
  const std::string content = ReadFileOrEmpty(from);
  if (content.empty()) return false;
  const std::string tmp = to + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), to.c_str()) == 0;
}

}  // namespace conduit::testing
