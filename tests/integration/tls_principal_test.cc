// A client certificate's principal, seen in the audit trail. A URI-SAN (SPIFFE)
// certificate and a CN-only one map to the expected principals by default, and through ordered
// --tls-principal-rules otherwise.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "conduit/security/v1/security.grpc.pb.h"
#include "tests/integration/tls_fixture.h"

namespace conduit::testing {
namespace {

namespace spb = ::conduit::security::v1;
using ::testing::ElementsAre;

class TlsPrincipalTest : public TlsTransportTest {
 protected:
  // The principals of the audited CreateQueue calls, oldest first.
  std::vector<std::string> AuditedPrincipals() {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    spb::ListAuditRequest req;
    spb::ListAuditResponse resp;
    const grpc::Status s =
        spb::Security::NewStub(Channel(one_.ca, &one_.worker))->ListAudit(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> principals;
    for (const spb::AuditEntry& e : resp.entries()) {
      if (e.method() == "/conduit.queue.v1.WorkQueue/CreateQueue") {
        principals.push_back(e.principal());
      }
    }
    return principals;
  }
};

TEST_F(TlsPrincipalTest, CertificatesMapToPrincipalsByDefault) {
  StartServer();
  ASSERT_TRUE(CreateQueue(Channel(one_.ca, &one_.worker), "by-worker").ok());
  ASSERT_TRUE(CreateQueue(Channel(one_.ca, &one_.operator_), "by-operator").ok());
  EXPECT_THAT(AuditedPrincipals(),
              ElementsAre("User:spiffe://conduit.dev/worker", "User:operator"));
}

TEST_F(TlsPrincipalTest, OrderedRulesMapCertificatesToPrincipals) {
  StartServer({"--tls-principal-rules",
               "URI:^spiffe://conduit\\.dev/(.*)$/svc-\\1/,CN:^(.*)$/\\1-team/U,DEFAULT"});
  ASSERT_TRUE(CreateQueue(Channel(one_.ca, &one_.worker), "by-worker").ok());
  ASSERT_TRUE(CreateQueue(Channel(one_.ca, &one_.operator_), "by-operator").ok());
  EXPECT_THAT(AuditedPrincipals(), ElementsAre("User:svc-worker", "User:OPERATOR-TEAM"));
}

TEST_F(TlsPrincipalTest, ABadRuleStopsTheServerAtStartup) {
  const std::vector<std::string> args = {"--tls-cert", watched_cert_,           "--tls-key",
                                         watched_key_, "--tls-principal-rules", "URI:(unclosed/x/"};
  ServerProcess server(QueueBinary(), dir_.Sub("data"), dir_.path(), args);
  EXPECT_FALSE(server.running());
}

}  // namespace
}  // namespace conduit::testing
