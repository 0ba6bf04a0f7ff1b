// TLS on a server's gRPC port with a real
// conduit-queue: a required client certificate that is missing or from another CA fails the
// handshake before any handler runs; `request` and server-only TLS; a bad flag combination
// stops the server at startup. Rotation without a restart: tls_rotation_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <regex>

#include "tests/integration/tls_fixture.h"
#include "tests/support/http_metrics.h"
#include "tests/support/https_get.h"

namespace conduit::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// No client certificate where one is required → the handshake fails, the call
// is UNAVAILABLE and its handler never ran (the queue it would have created does not exist).
TEST_F(TlsTransportTest, RequiredClientCertificateMissingFailsTheHandshake) {
  StartServer();  // --tls-client-ca without --tls-client-auth: required
  const grpc::Status no_cert = CreateQueue(Channel(one_.ca), "made-without-a-certificate");
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << no_cert.error_message();
  const grpc::Status plaintext = CreateQueue(PlaintextChannel(), "made-in-plaintext");
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();

  EXPECT_THAT(QueueNames(), IsEmpty());  // the worker's certificate (URI SAN) is accepted
  const grpc::Status by_operator = CreateQueue(Channel(one_.ca, &one_.operator_), "by-operator");
  EXPECT_TRUE(by_operator.ok()) << by_operator.error_message();  // so is the CN-only one
  EXPECT_THAT(QueueNames(), ElementsAre("by-operator"));
  EXPECT_FALSE(server_->Exited());
}

// A client certificate from another CA is refused (no handler
// runs); one from the configured CA is served.
TEST_F(TlsTransportTest, ClientCertificateFromAnotherCaIsRefused) {
  StartServer();
  const grpc::Status other_ca = CreateQueue(Channel(one_.ca, &two_.worker), "made-by-a-stranger");
  EXPECT_EQ(other_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << other_ca.error_message();
  const grpc::Status good = ListQueues(Channel(one_.ca, &one_.worker));
  EXPECT_TRUE(good.ok()) << good.error_message();
  EXPECT_THAT(QueueNames(), IsEmpty());
}

// The client checks the server too: a client trusting only CA two refuses set one's server.
TEST_F(TlsTransportTest, ClientTrustingAnotherCaRefusesTheServer) {
  StartServer();
  const grpc::Status s = ListQueues(Channel(two_.ca, &one_.worker));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

// --tls-client-auth=request: a client without a certificate is served, one with a certificate
// from another CA is still refused.
TEST_F(TlsTransportTest, RequestedClientCertificateIsVerifiedWhenSent) {
  StartServer({"--tls-client-auth", "request"});
  const grpc::Status no_cert = ListQueues(Channel(one_.ca));
  EXPECT_TRUE(no_cert.ok()) << no_cert.error_message();
  const grpc::Status good = ListQueues(Channel(one_.ca, &one_.worker));
  EXPECT_TRUE(good.ok()) << good.error_message();
  const grpc::Status other_ca = ListQueues(Channel(one_.ca, &two_.worker));
  EXPECT_EQ(other_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << other_ca.error_message();
}

// TLS without a client CA: any TLS client trusting the server's CA is served; plaintext is not.
TEST_F(TlsTransportTest, ServerOnlyTlsServesClientsWithoutCertificates) {
  StartServer({}, /*with_client_ca=*/false);
  const grpc::Status tls = ListQueues(Channel(one_.ca));
  EXPECT_TRUE(tls.ok()) << tls.error_message();
  const grpc::Status plaintext = ListQueues(PlaintextChannel());
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
}

// Runs conduit-queue with `tls_flags` expecting it to refuse to start: its exit code and log.
int RunExpectingStartupFailure(const TempDir& dir, std::vector<std::string> tls_flags,
                               std::string* log) {
  std::vector<std::string> argv = {QueueBinary(),
                                   "--data-dir",
                                   dir.Sub("data"),
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   ""};
  argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
  const std::string log_path = dir.Sub("startup.log");
  std::remove(log_path.c_str());
  const int status = RunCommand(argv, log_path);  // exits by itself: no port is ever served
  *log = ReadFileOrEmpty(log_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Bad combinations stop the server before it opens any data, with a message naming the flag.
TEST_F(TlsTransportTest, BadFlagCombinationsFailAtStartup) {
  std::string log;
  EXPECT_EQ(RunExpectingStartupFailure(dir_, {"--tls-cert", one_.server.cert}, &log), 1);
  EXPECT_THAT(log, HasSubstr("--tls-cert is set without --tls-key"));
  EXPECT_EQ(RunExpectingStartupFailure(dir_, {"--tls-key", one_.server.key}, &log), 1);
  EXPECT_THAT(log, HasSubstr("--tls-key is set without --tls-cert"));
  const std::string missing = dir_.Sub("no-such-dir/server.pem");
  EXPECT_EQ(
      RunExpectingStartupFailure(dir_, {"--tls-cert", missing, "--tls-key", one_.server.key}, &log),
      1);
  EXPECT_THAT(log, HasSubstr("--tls-cert file '" + missing + "' cannot be read"));
  EXPECT_EQ(RunExpectingStartupFailure(dir_,
                                       {"--tls-cert", one_.server.cert, "--tls-key",
                                        one_.server.key, "--tls-client-auth", "require"},
                                       &log),
            1);
  EXPECT_THAT(log, HasSubstr("--tls-client-auth=require needs --tls-client-ca"));
  EXPECT_EQ(RunExpectingStartupFailure(
                dir_, {"--tls-cert", one_.server.cert, "--tls-key", two_.server.key}, &log),
            1);
  EXPECT_THAT(log, HasSubstr("is not the key of the first certificate"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("data"))) << "no data was opened";
}

// The metrics port over HTTPS (--metrics-tls-*, its own files): a scrape of the real server with
// a client certificate from the metrics client CA is served; without one, or in plain HTTP, it
// gets nothing; a metrics certificate without its key stops the server at startup.
TEST_F(TlsTransportTest, MetricsPortServesHttpsToScrapersWithACertificate) {
  StartServer({"--metrics-listen", "127.0.0.1:0", "--metrics-tls-cert", one_.server.cert,
               "--metrics-tls-key", one_.server.key, "--metrics-tls-client-ca", one_.ca,
               "--log-level", "info"});
  static const std::regex kServing("metrics on https://127\\.0\\.0\\.1:([0-9]+)/metrics");
  std::smatch m;
  std::string log;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    absl::SleepFor(absl::Milliseconds(20));  // the line follows the port file
    log = ReadFileOrEmpty(dir_.Sub("server.log"));
  } while (!std::regex_search(log, m, kServing) && absl::Now() < deadline);
  ASSERT_EQ(m.size(), 2u) << log;
  const int port = std::stoi(m[1]);

  // A queue with a job, so that the page has its series.
  ASSERT_TRUE(CreateQueue(Channel(one_.ca, &one_.worker), "scraped").ok());
  grpc::ClientContext ctx;
  qpb::EnqueueRequest enqueue;
  enqueue.set_queue("scraped");
  enqueue.add_jobs()->set_payload("job");
  qpb::EnqueueResponse enqueued;
  ASSERT_TRUE(qpb::WorkQueue::NewStub(Channel(one_.ca, &one_.worker))
                  ->Enqueue(&ctx, enqueue, &enqueued)
                  .ok());
  auto page = HttpsGet(port, one_.ca, one_.worker.cert, one_.worker.key);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("200 OK"));
  EXPECT_THAT(*page, HasSubstr("conduit_queue_jobs{queue=\"scraped\",state=\"ready\"} 1"));
  auto without = HttpsGet(port, one_.ca);
  EXPECT_FALSE(without.ok()) << *without;
  EXPECT_THAT(HttpGetMetrics(port), Not(HasSubstr("200 OK")));

  std::string startup;
  EXPECT_EQ(RunExpectingStartupFailure(
                dir_, {"--metrics-listen", "127.0.0.1:0", "--metrics-tls-cert", one_.server.cert},
                &startup),
            1);
  EXPECT_THAT(startup, HasSubstr("--metrics-tls-cert is set without --metrics-tls-key"));
  EXPECT_EQ(
      RunExpectingStartupFailure(
          dir_, {"--metrics-tls-cert", one_.server.cert, "--metrics-tls-key", one_.server.key},
          &startup),
      1);
  EXPECT_THAT(startup, HasSubstr("--metrics-listen is empty"));
}

}  // namespace
}  // namespace conduit::testing
