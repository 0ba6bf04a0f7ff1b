// Certificate files replaced atomically (a write to a temporary
// file, then a rename) are used by the next handshake without a restart — the server's own
// certificate and key, and the CA bundle client certificates are checked against. Connections
// opened before a rotation keep working.

#include <gtest/gtest.h>

#include "tests/integration/tls_fixture.h"

namespace conduit::testing {
namespace {

// How long a rotation may take to show: --tls-refresh-seconds is 1, and a refresh that falls
// between the key's rename and the certificate's pairs them wrongly until the next one.
constexpr absl::Duration kRotationBound = absl::Seconds(20);

TEST_F(TlsTransportTest, RotatedServerCertificateIsServedWithoutRestart) {
  StartServer();
  const pid_t pid = server_->pid();
  auto trusts_one = [&] { return Channel(one_.ca, &one_.worker); };
  auto trusts_two = [&] { return Channel(two_.ca, &one_.worker); };
  const std::shared_ptr<grpc::Channel> opened_before = trusts_one();
  ASSERT_TRUE(ListQueues(opened_before).ok());
  EXPECT_EQ(ListQueues(trusts_two()).error_code(), grpc::StatusCode::UNAVAILABLE);

  // Set two's server certificate and key (CA two) into the watched paths, the key first.
  ASSERT_TRUE(ReplaceFileAtomically(two_.server.key, watched_key_));
  ASSERT_TRUE(ReplaceFileAtomically(two_.server.cert, watched_cert_));
  const absl::Time rotated = absl::Now();
  const grpc::Status now_two = ListQueuesUntilOk(trusts_two, kRotationBound);
  ASSERT_TRUE(now_two.ok()) << "a client trusting CA two is still refused after "
                            << absl::Now() - rotated << ": " << now_two.error_message();
  std::printf("server certificate rotation seen after %s\n",
              absl::FormatDuration(absl::Now() - rotated).c_str());

  const grpc::Status one_refused = ListQueues(trusts_one());
  EXPECT_EQ(one_refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a new connection trusting only CA one still succeeds: " << one_refused.error_message();
  const grpc::Status kept = ListQueues(opened_before);
  EXPECT_TRUE(kept.ok()) << "an open connection broke: " << kept.error_message();
  EXPECT_FALSE(server_->Exited());
  EXPECT_EQ(server_->pid(), pid);
}

TEST_F(TlsTransportTest, RotatedClientCaIsUsedWithoutRestart) {
  StartServer();
  const pid_t pid = server_->pid();
  auto worker_one = [&] { return Channel(one_.ca, &one_.worker); };
  auto worker_two = [&] { return Channel(one_.ca, &two_.worker); };
  ASSERT_TRUE(ListQueues(worker_one()).ok());
  EXPECT_EQ(ListQueues(worker_two()).error_code(), grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(ReplaceFileAtomically(two_.ca, watched_client_ca_));
  const absl::Time rotated = absl::Now();
  const grpc::Status now_two = ListQueuesUntilOk(worker_two, kRotationBound);
  ASSERT_TRUE(now_two.ok()) << "CA two's worker is still refused after " << absl::Now() - rotated
                            << ": " << now_two.error_message();
  std::printf("client CA rotation seen after %s\n",
              absl::FormatDuration(absl::Now() - rotated).c_str());

  const grpc::Status one_refused = ListQueues(worker_one());
  EXPECT_EQ(one_refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "CA one's worker is still accepted: " << one_refused.error_message();
  EXPECT_FALSE(server_->Exited());
  EXPECT_EQ(server_->pid(), pid);
}

}  // namespace
}  // namespace conduit::testing
