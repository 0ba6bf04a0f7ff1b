#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/server_process.h"
#include "tests/support/test_certs.h"
#include "tests/support/two_ca_test.h"

namespace conduit::testing {

namespace qpb = ::conduit::queue::v1;

// The conduit-queue binary under test (CONDUIT_BIN_DIR is set by CTest).
inline std::string QueueBinary() {
  const char* bin = std::getenv("CONDUIT_BIN_DIR");
  return std::string(bin ? bin : "build/bin") + "/conduit-queue";
}

// A real conduit-queue serving TLS from files it watches: two independent
// sets of TLS material (CAs "one" and "two", made once per suite by scripts/make-certs.sh and
// only read), and the server's watched files in <tmp>/watched, first copies of set one's.
// Clients are built per call on a channel of their own, so every call makes a fresh connection
// and handshake.
class TlsTransportTest : public TwoCaTest {
 protected:
  void SetUp() override {
    TwoCaTest::SetUp();
    if (HasFatalFailure()) return;
    std::filesystem::create_directories(dir_.Sub("watched"));
    ASSERT_TRUE(ReplaceFileAtomically(one_.server.cert, watched_cert_));
    ASSERT_TRUE(ReplaceFileAtomically(one_.server.key, watched_key_));
    ASSERT_TRUE(ReplaceFileAtomically(one_.ca, watched_client_ca_));
  }

  // Starts conduit-queue on the watched files (re-read every second) plus `extra` flags.
  void StartServer(std::vector<std::string> extra = {}, bool with_client_ca = true) {
    std::vector<std::string> args = {"--tls-cert", watched_cert_,           "--tls-key",
                                     watched_key_, "--tls-refresh-seconds", "1"};
    if (with_client_ca) {
      args.insert(args.end(), {"--tls-client-ca", watched_client_ca_});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<ServerProcess>(QueueBinary(), dir_.Sub("data"), dir_.path(), args);
    ASSERT_TRUE(server_->running()) << "see " << dir_.path() << "/server.log";
  }

  // A channel trusting only `ca` for the server, presenting `client` when given; never shares
  // a connection with another channel.
  std::shared_ptr<grpc::Channel> Channel(const std::string& ca,
                                         const CertKeyFiles* client = nullptr) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileOrEmpty(ca);
    if (client != nullptr) {
      ssl.pem_cert_chain = ReadFileOrEmpty(client->cert);
      ssl.pem_private_key = ReadFileOrEmpty(client->key);
    }
    return grpc::CreateCustomChannel(server_->address(), grpc::SslCredentials(ssl), Args());
  }
  std::shared_ptr<grpc::Channel> PlaintextChannel() const {
    return grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(),
                                     Args());
  }

  static grpc::Status ListQueues(const std::shared_ptr<grpc::Channel>& channel,
                                 qpb::ListQueuesResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return qpb::WorkQueue::NewStub(channel)->ListQueues(&ctx, {}, response);
  }
  static grpc::Status ListQueues(const std::shared_ptr<grpc::Channel>& channel) {
    qpb::ListQueuesResponse ignored;
    return ListQueues(channel, &ignored);
  }
  static grpc::Status CreateQueue(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& name) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    qpb::CreateQueueRequest request;
    request.set_name(name);
    qpb::CreateQueueResponse response;
    return qpb::WorkQueue::NewStub(channel)->CreateQueue(&ctx, request, &response);
  }

  // The names of the server's queues, read by a client set one's CA and worker allow.
  std::vector<std::string> QueueNames() {
    qpb::ListQueuesResponse response;
    const grpc::Status s = ListQueues(Channel(one_.ca, &one_.worker), &response);
    EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    std::vector<std::string> names;
    for (const auto& q : response.queues()) names.push_back(q.name());
    return names;
  }

  // Calls ListQueues on a fresh channel from `make_channel` until it succeeds; the file watcher
  // runs in the server process on its own (real) clock, so the test polls it with a bound.
  template <typename MakeChannel>
  grpc::Status ListQueuesUntilOk(MakeChannel make_channel, absl::Duration bound) {
    const absl::Time deadline = absl::Now() + bound;
    grpc::Status s = ListQueues(make_channel());
    while (!s.ok() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(200));  // waiting for the server to re-read its files
      s = ListQueues(make_channel());
    }
    return s;
  }

  TempDir dir_;  // this test's watched files, data directory and server log
  const std::string watched_cert_ = dir_.Sub("watched/server.pem");
  const std::string watched_key_ = dir_.Sub("watched/server.key");
  const std::string watched_client_ca_ = dir_.Sub("watched/client-ca.pem");
  std::unique_ptr<ServerProcess> server_;

 private:
  static grpc::ChannelArguments Args() {
    grpc::ChannelArguments args;
    // A subchannel (connection) of this channel only: each channel does its own handshake.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return args;
  }
};

}  // namespace conduit::testing
