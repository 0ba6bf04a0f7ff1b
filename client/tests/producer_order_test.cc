// The pipelined Producer keeps a partition's order when the broker sees one batch overtake
// another. A proxy in front of the real broker holds the first Produce back until the second
// has been answered, so the broker refuses the second as a sequence gap (ABORTED); the producer
// must resend it after the first, not fail it and not resend it before.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "client/producer.h"
#include "client/tests/client_fixture.h"

namespace conduit::client {
namespace {

namespace logpb = ::conduit::log::v1;

// Forwards GetMetadata, DescribeTopic, InitProducer and Produce to the broker, except that the
// batch with sequence 0 waits until the one with sequence 1 has been answered (whichever arrives
// first). Records the base sequence of every Produce it forwards. Its GetMetadata names the proxy
// as the broker, so that the producer's batches keep coming through it.
class ReorderingProxy final : public logpb::LogService::CallbackService {
 public:
  explicit ReorderingProxy(const std::string& broker)
      : stub_(logpb::LogService::NewStub(
            grpc::CreateChannel(broker, grpc::InsecureChannelCredentials()))) {}

  void set_address(const std::string& address) {
    absl::MutexLock lock(&mu_);
    address_ = address;
  }

  grpc::ServerUnaryReactor* GetMetadata(grpc::CallbackServerContext* ctx,
                                        const logpb::GetMetadataRequest* req,
                                        logpb::GetMetadataResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto* call = new grpc::ClientContext;
    std::string address;
    {
      absl::MutexLock lock(&mu_);
      address = address_;
    }
    stub_->async()->GetMetadata(call, req, resp, [reactor, call, resp, address](grpc::Status s) {
      for (auto& b : *resp->mutable_brokers()) b.set_address(address);
      delete call;
      reactor->Finish(s);
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* DescribeTopic(grpc::CallbackServerContext* ctx,
                                          const logpb::DescribeTopicRequest* req,
                                          logpb::DescribeTopicResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto* call = new grpc::ClientContext;
    stub_->async()->DescribeTopic(call, req, resp, Finisher(reactor, call));
    return reactor;
  }
  grpc::ServerUnaryReactor* InitProducer(grpc::CallbackServerContext* ctx,
                                         const logpb::InitProducerRequest* req,
                                         logpb::InitProducerResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto* call = new grpc::ClientContext;
    stub_->async()->InitProducer(call, req, resp, Finisher(reactor, call));
    return reactor;
  }
  grpc::ServerUnaryReactor* Produce(grpc::CallbackServerContext* ctx,
                                    const logpb::ProduceRequest* req,
                                    logpb::ProduceResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    const int32_t sequence = req->sequences(0).base_sequence();
    if (sequence == 0 && !released_) {
      parked_ = {reactor, req, resp};  // the first batch waits for the second's answer
      return reactor;
    }
    if (sequence == 1 && !released_) {
      Send(reactor, req, resp, [this] {  // answered: now the first may go
        absl::MutexLock lock(&mu_);
        released_ = true;
        if (parked_.reactor != nullptr) Send(parked_.reactor, parked_.req, parked_.resp, [] {});
      });
      return reactor;
    }
    Send(reactor, req, resp, [] {});
    return reactor;
  }

  std::vector<int32_t> forwarded() {
    absl::MutexLock lock(&mu_);
    return forwarded_;
  }

 private:
  struct Parked {
    grpc::ServerUnaryReactor* reactor = nullptr;
    const logpb::ProduceRequest* req = nullptr;
    logpb::ProduceResponse* resp = nullptr;
  };

  // Finishes the proxied call with the broker's status once the forwarded call returns.
  static std::function<void(grpc::Status)> Finisher(grpc::ServerUnaryReactor* reactor,
                                                    grpc::ClientContext* call,
                                                    std::function<void()> then = [] {}) {
    return [reactor, call, then](grpc::Status s) {
      delete call;
      reactor->Finish(s);
      then();
    };
  }

  void Send(grpc::ServerUnaryReactor* reactor, const logpb::ProduceRequest* req,
            logpb::ProduceResponse* resp, std::function<void()> then)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    forwarded_.push_back(req->sequences(0).base_sequence());
    auto* call = new grpc::ClientContext;
    stub_->async()->Produce(call, req, resp, Finisher(reactor, call, std::move(then)));
  }

  std::unique_ptr<logpb::LogService::Stub> stub_;
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;  // the second batch has been answered
  Parked parked_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> forwarded_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);  // the proxy's own
};

TEST_F(ClientTest, AnOvertakingBatchIsResentAfterTheOneItOvertook) {
  ASSERT_TRUE(log_->CreateTopic("reorder", 1).ok());
  ReorderingProxy proxy(address());
  auto proxy_server = grpc_util::StartServer({}, {&proxy});
  ASSERT_TRUE(proxy_server.ok()) << proxy_server.status();
  proxy.set_address((*proxy_server)->address());
  {
    auto producer = Producer::Create({.address = (*proxy_server)->address(), .topic = "reorder",
                                      .max_batch_records = 1, .linger = absl::ZeroDuration(),
                                      .max_in_flight = 5});
    ASSERT_TRUE(producer.ok()) << producer.status();
    auto first = (*producer)->Send(ProducerRecord{.value = "first"});
    auto second = (*producer)->Send(ProducerRecord{.value = "second"});
    ASSERT_TRUE((*producer)->Flush().ok());
    absl::StatusOr<RecordPosition> a = first.get(), b = second.get();
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status() << ": the overtaking batch was failed, not resent";
    EXPECT_EQ(a->offset, 0);
    EXPECT_EQ(b->offset, 1);
  }
  // Sequence 1 overtook 0 and, 0 being held here past the broker's reorder wait (250 ms), was
  // refused; 0 went in; 1 was resent once, after it.
  EXPECT_EQ(proxy.forwarded(), (std::vector<int32_t>{1, 0, 1}));
  logpb::FetchResponse fetched;
  ASSERT_TRUE(log_->Fetch("reorder", 0, 0, &fetched).ok());
  ASSERT_EQ(fetched.records_size(), 2);
  EXPECT_EQ(fetched.records(0).value(), "first");
  EXPECT_EQ(fetched.records(1).value(), "second");
  (*proxy_server)->Shutdown();
}

}  // namespace
}  // namespace conduit::client
