// The HTTPS /metrics port ("the metrics port can use TLS too"): scraped with a
// real TLS client; client certificates required with a client CA; files replaced by a rename
// are used from the next scrape; bad files stop it at start, and a bad replacement keeps the
// files before it.

#include "common/metrics/tls_exposer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <fstream>
#include <thread>

#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "tests/support/http_metrics.h"
#include "tests/support/https_get.h"
#include "tests/support/test_certs.h"
#include "tests/support/two_ca_test.h"

namespace conduit::metrics {
namespace {

using ::conduit::testing::HttpsGet;
using ::conduit::testing::ReplaceFileAtomically;
using ::conduit::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class TlsExposerTest : public testing::TwoCaTest {
 protected:
  void SetUp() override {
    TwoCaTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(ReplaceFileAtomically(one_.server.cert, cert_));
    ASSERT_TRUE(ReplaceFileAtomically(one_.server.key, key_));
    ASSERT_TRUE(ReplaceFileAtomically(one_.ca, client_ca_));
    prometheus::BuildCounter()
        .Name("conduit_test_scrapes_total")
        .Register(*registry_)
        .Add({})
        .Increment(3);
  }

  void Start(bool with_client_ca) {
    MetricsTlsFiles files{.cert_path = cert_, .key_path = key_};
    if (with_client_ca) files.client_ca_path = client_ca_;
    auto exposer = TlsExposer::Start("127.0.0.1:0", files, registry_);
    ASSERT_TRUE(exposer.ok()) << exposer.status();
    exposer_ = std::move(*exposer);
    ASSERT_GT(exposer_->port(), 0);
  }

  TempDir dir_;
  const std::string cert_ = dir_.Sub("server.pem");
  const std::string key_ = dir_.Sub("server.key");
  const std::string client_ca_ = dir_.Sub("client-ca.pem");
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<TlsExposer> exposer_;
};

TEST_F(TlsExposerTest, ServesTheRegistryOverTls) {
  Start(/*with_client_ca=*/false);
  auto page = HttpsGet(exposer_->port(), one_.ca);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(*page, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(*page, HasSubstr("\nconduit_test_scrapes_total 3\n"));

  auto other = HttpsGet(exposer_->port(), one_.ca, "", "", "/other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(*other, StartsWith("HTTP/1.1 404 Not Found"));
  auto post = HttpsGet(exposer_->port(), one_.ca, "", "", "/metrics", "POST");
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_THAT(*post, StartsWith("HTTP/1.1 405"));
}

// Plain HTTP gets no page, and a client that does not trust the server's CA refuses it.
TEST_F(TlsExposerTest, PlainHttpAndAnotherCaGetNothing) {
  Start(/*with_client_ca=*/false);
  EXPECT_THAT(testing::HttpGetMetrics(exposer_->port()), Not(HasSubstr("200 OK")));
  auto stranger = HttpsGet(exposer_->port(), two_.ca);
  EXPECT_FALSE(stranger.ok()) << *stranger;
  EXPECT_TRUE(HttpsGet(exposer_->port(), one_.ca).ok()) << "the port still serves";
}

TEST_F(TlsExposerTest, AClientCaRequiresAClientCertificateFromIt) {
  Start(/*with_client_ca=*/true);
  auto without = HttpsGet(exposer_->port(), one_.ca);
  EXPECT_FALSE(without.ok()) << *without;
  auto foreign = HttpsGet(exposer_->port(), one_.ca, two_.worker.cert, two_.worker.key);
  EXPECT_FALSE(foreign.ok()) << *foreign;
  auto page = HttpsGet(exposer_->port(), one_.ca, one_.worker.cert, one_.worker.key);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("conduit_test_scrapes_total 3"));
}

// Rotation (replace by rename): the next connection is served with the new certificate, with no
// restart; a client that trusts only the old CA now refuses the server.
TEST_F(TlsExposerTest, ReplacedFilesAreUsedFromTheNextScrape) {
  Start(/*with_client_ca=*/false);
  ASSERT_TRUE(HttpsGet(exposer_->port(), one_.ca).ok());
  ASSERT_FALSE(HttpsGet(exposer_->port(), two_.ca).ok());
  ASSERT_TRUE(ReplaceFileAtomically(two_.server.cert, cert_));
  ASSERT_TRUE(ReplaceFileAtomically(two_.server.key, key_));
  auto page = HttpsGet(exposer_->port(), two_.ca);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("conduit_test_scrapes_total 3"));
  EXPECT_FALSE(HttpsGet(exposer_->port(), one_.ca).ok());
}

// The client CA is looked at like the certificate: replaced, scrapers with certificates of the
// new CA are served from the next scrape and those of the old one refused.
TEST_F(TlsExposerTest, AReplacedClientCaIsUsedFromTheNextScrape) {
  Start(/*with_client_ca=*/true);
  ASSERT_TRUE(HttpsGet(exposer_->port(), one_.ca, one_.worker.cert, one_.worker.key).ok());
  ASSERT_FALSE(HttpsGet(exposer_->port(), one_.ca, two_.worker.cert, two_.worker.key).ok());
  ASSERT_TRUE(ReplaceFileAtomically(two_.ca, client_ca_));
  auto page = HttpsGet(exposer_->port(), one_.ca, two_.worker.cert, two_.worker.key);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("conduit_test_scrapes_total 3"));
  EXPECT_FALSE(HttpsGet(exposer_->port(), one_.ca, one_.worker.cert, one_.worker.key).ok());
}

// A replacement that does not load (a key of another certificate) keeps the files before it.
TEST_F(TlsExposerTest, AReplacementThatDoesNotLoadKeepsThePreviousFiles) {
  Start(/*with_client_ca=*/false);
  ASSERT_TRUE(ReplaceFileAtomically(two_.server.key, key_));
  auto page = HttpsGet(exposer_->port(), one_.ca);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("200 OK"));
  ASSERT_TRUE(ReplaceFileAtomically(one_.server.key, key_));  // fixed: loads again
  EXPECT_TRUE(HttpsGet(exposer_->port(), one_.ca).ok());
}

// A client that connects and says nothing delays the next scrape by at most the per-connection
// budget (5 s), it does not stop the port.
TEST_F(TlsExposerTest, ASilentClientDoesNotStopThePort) {
  Start(/*with_client_ca=*/false);
  const int silent = testing::ConnectLoopback(exposer_->port());
  ASSERT_GE(silent, 0);
  auto page = HttpsGet(exposer_->port(), one_.ca);  // waits in the backlog, then is served
  ::close(silent);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("200 OK"));
}

// A scraper that sends its request and resets the connection (SO_LINGER 0) before the answer:
// the answer's write fails with EPIPE, and the SIGPIPE it raises does not kill the process (this
// test's process: without the exposer blocking it, gtest dies here).
TEST_F(TlsExposerTest, AClientThatHangsUpMidAnswerDoesNotKillTheProcess) {
  Start(/*with_client_ca=*/false);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  ASSERT_NE(ctx, nullptr);
  for (int i = 0; i < 200; ++i) {
    const int fd = testing::ConnectLoopback(exposer_->port());
    ASSERT_GE(fd, 0);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {  // not verified: this client never reads what it is sent
      const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
      SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    }
    const linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    SSL_free(ssl);
    ::close(fd);
  }
  SSL_CTX_free(ctx);
  auto page = HttpsGet(exposer_->port(), one_.ca);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("200 OK"));
}

TEST_F(TlsExposerTest, BadFilesAndAddressesFailAtStart) {
  auto start = [&](MetricsTlsFiles files, const std::string& listen = "127.0.0.1:0") {
    return TlsExposer::Start(listen, files, registry_).status();
  };
  absl::Status s = start({.cert_path = cert_});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--metrics-tls-cert is set without --metrics-tls-key"));
  s = start({.key_path = key_});
  EXPECT_THAT(s.message(), HasSubstr("need --metrics-tls-cert"));
  s = start({.cert_path = cert_, .key_path = two_.server.key});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is not the key of the first certificate in "
                                     "--metrics-tls-cert"));
  s = start({.cert_path = dir_.Sub("missing.pem"), .key_path = key_});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("--metrics-tls-cert file '" + dir_.Sub("missing.pem")));
  s = start({.cert_path = cert_, .key_path = key_, .client_ca_path = key_});
  EXPECT_THAT(s.message(),
              HasSubstr("--metrics-tls-client-ca file '" + key_ + "' holds no PEM certificate"));
  s = start({.cert_path = cert_, .key_path = key_}, "no-port");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::metrics
