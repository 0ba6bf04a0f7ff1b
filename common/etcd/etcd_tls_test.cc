// TLS to etcd ("etcd connections use TLS and their own identity when
// configured") against a real etcd serving https with --client-cert-auth, certificates made by
// scripts/make-certs.sh at test time: a client with the CA and a client certificate works; one
// without a certificate, or in plaintext, is refused; the flags are checked.

#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/etcd_flags.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"
#include "tests/support/test_certs.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, etcd_endpoints);
ABSL_DECLARE_FLAG(std::string, etcd_tls_ca);
ABSL_DECLARE_FLAG(std::string, etcd_tls_cert);
ABSL_DECLARE_FLAG(std::string, etcd_tls_key);

namespace conduit::etcd {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = testing::MakeTestCerts(dir_.Sub("certs"));
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
    etcd_.UseTls(certs_.server.cert, certs_.server.key, certs_.ca);
    ASSERT_TRUE(etcd_.Start().ok()) << "see " << etcd_.log_path();
  }
  ClientOptions Tls(bool with_client_cert) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(certs_.ca);
    if (with_client_cert) {
      ssl.pem_cert_chain = Read(certs_.worker.cert);
      ssl.pem_private_key = Read(certs_.worker.key);
    }
    ClientOptions options;
    options.request_timeout = absl::Seconds(2);
    options.credentials = grpc::SslCredentials(ssl);
    return options;
  }

  testing::TempDir dir_;
  testing::TestCertSet certs_;
  testing::EtcdProcess etcd_{dir_.path()};
};

TEST_F(EtcdTlsTest, AClientWithTheCaAndACertificateIsServed) {
  auto client = Client::Connect({"https://" + etcd_.endpoint()}, Tls(true));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Put("/tls/k", "v").ok());
  auto got = (*client)->Get("/tls/k");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].value, "v");
}

TEST_F(EtcdTlsTest, NoClientCertificateOrPlaintextIsRefused) {
  auto no_cert = Client::Connect({etcd_.endpoint()}, Tls(false));
  ASSERT_TRUE(no_cert.ok());
  EXPECT_TRUE(absl::IsUnavailable((*no_cert)->Put("/tls/k", "v").status()));
  ClientOptions plain;
  plain.request_timeout = absl::Seconds(2);
  auto plaintext = Client::Connect({etcd_.endpoint()}, plain);
  ASSERT_TRUE(plaintext.ok());
  EXPECT_FALSE((*plaintext)->Put("/tls/k", "v").ok());
  // Nothing was written by either.
  auto good = Client::Connect({etcd_.endpoint()}, Tls(true));
  ASSERT_TRUE(good.ok());
  auto got = (*good)->Get("/tls/k");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->kvs.empty());
}

TEST_F(EtcdTlsTest, EndpointSchemeAndFlagsMustAgree) {
  EXPECT_TRUE(
      absl::IsInvalidArgument(Client::Connect({"http://" + etcd_.endpoint()}, Tls(true)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Connect({"https://" + etcd_.endpoint()}).status()));

  absl::SetFlag(&FLAGS_etcd_endpoints, {"https://" + etcd_.endpoint()});
  absl::SetFlag(&FLAGS_etcd_tls_cert, certs_.worker.cert);
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdFlagsFromCommandLine().status()));  // no key
  absl::SetFlag(&FLAGS_etcd_tls_key, certs_.worker.key);
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdFlagsFromCommandLine().status()));  // no CA
  absl::SetFlag(&FLAGS_etcd_tls_ca, certs_.ca);
  auto flags = EtcdFlagsFromCommandLine();
  ASSERT_TRUE(flags.ok()) << flags.status();
  auto client = Client::Connect(flags->endpoints, [&] {
    ClientOptions o;
    o.credentials = flags->credentials;
    return o;
  }());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Put("/tls/by-flags", "v").ok());
}

}  // namespace
}  // namespace conduit::etcd
