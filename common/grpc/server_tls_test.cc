// The checks MakeServerCredentials makes before a server starts serving TLS, on material from
// scripts/make-certs.sh (tests/support/test_certs.h). The handshakes themselves are tested on
// a real server in tests/integration/tls_transport_test.cc.
#include "common/grpc/server_tls.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "common/testing/temp_dir.h"
#include "tests/support/test_certs.h"
#include "tests/support/two_ca_test.h"

namespace conduit::grpc_util {
namespace {

using ::testing::HasSubstr;

// Two sets of material (CAs "one" and "two"), made once for the suite and only read.
class ServerTlsTest : public testing::TwoCaTest {
 protected:
  ServerTlsOptions Valid() const {
    ServerTlsOptions o;
    o.cert_path = one_.server.cert;
    o.key_path = one_.server.key;
    o.client_ca_path = one_.ca;
    return o;
  }
  // The status of MakeServerCredentials(o); a non-null credential on OK.
  static absl::Status Make(const ServerTlsOptions& o) {
    auto made = MakeServerCredentials(o);
    if (made.ok()) {
      EXPECT_NE(*made, nullptr);
    }
    return made.status();
  }

  conduit::testing::TempDir dir_;  // this test's own files
};

TEST_F(ServerTlsTest, NothingSetIsPlaintext) {
  ServerTlsOptions o;
  EXPECT_FALSE(o.enabled());
  EXPECT_TRUE(Make(o).ok());
  EXPECT_EQ(DescribeServerTls(o), "plaintext");
}

TEST_F(ServerTlsTest, ValidMaterialMakesTlsCredentials) {
  ServerTlsOptions o = Valid();
  EXPECT_TRUE(Make(o).ok());
  EXPECT_EQ(o.EffectiveClientAuth(), ClientAuth::kRequire);  // a client CA: required by default
  EXPECT_EQ(DescribeServerTls(o), "TLS, client certificates required (CA " + one_.ca + ")");
  o.client_auth = ClientAuth::kRequest;
  EXPECT_TRUE(Make(o).ok());
  o.client_ca_path.clear();
  o.client_auth.reset();
  EXPECT_EQ(o.EffectiveClientAuth(), ClientAuth::kNone);
  EXPECT_TRUE(Make(o).ok());
  EXPECT_EQ(DescribeServerTls(o), "TLS, no client certificates");
}

TEST_F(ServerTlsTest, CertAndKeyGoTogether) {
  ServerTlsOptions o = Valid();
  o.key_path.clear();
  EXPECT_THAT(Make(o).message(), HasSubstr("--tls-cert is set without --tls-key"));
  o = Valid();
  o.cert_path.clear();
  EXPECT_THAT(Make(o).message(), HasSubstr("--tls-key is set without --tls-cert"));
  ServerTlsOptions ca_only;
  ca_only.client_ca_path = one_.ca;
  EXPECT_EQ(Make(ca_only).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Make(ca_only).message(), HasSubstr("--tls-client-ca needs TLS"));
}

TEST_F(ServerTlsTest, ClientAuthNeedsAClientCa) {
  ServerTlsOptions o = Valid();
  o.client_ca_path.clear();
  o.client_auth = ClientAuth::kRequire;
  EXPECT_THAT(Make(o).message(), HasSubstr("--tls-client-auth=require needs --tls-client-ca"));
  o.client_auth = ClientAuth::kRequest;
  EXPECT_THAT(Make(o).message(), HasSubstr("--tls-client-auth=request needs --tls-client-ca"));
  o.client_auth = ClientAuth::kNone;
  EXPECT_TRUE(Make(o).ok());
}

TEST_F(ServerTlsTest, ParsesClientAuthNames) {
  EXPECT_EQ(*ParseClientAuth("none"), ClientAuth::kNone);
  EXPECT_EQ(*ParseClientAuth("request"), ClientAuth::kRequest);
  EXPECT_EQ(*ParseClientAuth("require"), ClientAuth::kRequire);
  EXPECT_THAT(ParseClientAuth("required").status().message(),
              HasSubstr("is not one of none, request, require"));
}

TEST_F(ServerTlsTest, RefreshIntervalIsBounded) {
  ServerTlsOptions o = Valid();
  o.refresh_seconds = 0;
  EXPECT_THAT(Make(o).message(), HasSubstr("--tls-refresh-seconds=0 is outside [1, 86400]"));
  o.refresh_seconds = 1;
  EXPECT_TRUE(Make(o).ok());
}

TEST_F(ServerTlsTest, UnreadableFilesNameTheFlagAndPath) {
  ServerTlsOptions o = Valid();
  o.cert_path = dir_.Sub("missing.pem");
  absl::Status s = Make(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("--tls-cert file '" + o.cert_path + "' cannot be read"));
  o = Valid();
  o.client_ca_path = dir_.path();  // a directory
  s = Make(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--tls-client-ca file '" + dir_.path() + "'"));
}

TEST_F(ServerTlsTest, FilesOfTheWrongKindAreRefused) {
  ServerTlsOptions o = Valid();
  o.cert_path = one_.server.key;
  EXPECT_THAT(Make(o).message(), HasSubstr("holds no PEM certificate"));
  o = Valid();
  o.key_path = one_.server.cert;
  EXPECT_THAT(Make(o).message(), HasSubstr("holds no PEM private key"));
  o = Valid();
  o.client_ca_path = one_.server.key;
  EXPECT_THAT(Make(o).message(),
              HasSubstr("--tls-client-ca file '" + one_.server.key + "' holds no PEM certificate"));
}

TEST_F(ServerTlsTest, KeyOfAnotherCertificateIsRefused) {
  ServerTlsOptions o = Valid();
  o.key_path = two_.server.key;
  const absl::Status s = Make(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is not the key of the first certificate in --tls-cert"));
}

TEST_F(ServerTlsTest, EncryptedKeyIsRefusedWithoutPrompting) {
  const std::string encrypted = dir_.Sub("encrypted.key");
  const int status = testing::RunCommand({"/usr/bin/openssl", "pkey", "-in", one_.server.key,
                                          "-aes256", "-passout", "pass:secret", "-out", encrypted},
                                         dir_.Sub("openssl.log"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ServerTlsOptions o = Valid();
  o.key_path = encrypted;
  EXPECT_THAT(Make(o).message(), HasSubstr("an encrypted key cannot be used"));
}

}  // namespace
}  // namespace conduit::grpc_util
