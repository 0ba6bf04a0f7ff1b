#pragma once

// Blocking helpers over the queue's and the bridges' generated stubs, for tests that run real
// servers: create a queue and a bridge, produce records, and take every job out of a queue.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/log_client.h"

namespace conduit::testing {

namespace qpb = ::conduit::queue::v1;

class BridgeClient {
 public:
  explicit BridgeClient(const std::string& address)
      : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        queue_(qpb::WorkQueue::NewStub(channel_)),
        bridges_(qpb::Bridges::NewStub(channel_)) {}

  qpb::WorkQueue::Stub* queue() { return queue_.get(); }
  qpb::Bridges::Stub* bridges() { return bridges_.get(); }

  grpc::Status CreateQueue(const std::string& name, int64_t max_depth = 0) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::CreateQueueRequest req;
    req.set_name(name);
    if (max_depth > 0) req.mutable_config()->set_max_depth(max_depth);
    qpb::CreateQueueResponse resp;
    return queue_->CreateQueue(&ctx, req, &resp);
  }

  grpc::Status CreateBridge(const qpb::BridgeSpec& spec) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::CreateBridgeRequest req;
    *req.mutable_spec() = spec;
    qpb::CreateBridgeResponse resp;
    return bridges_->CreateBridge(&ctx, req, &resp);
  }

  qpb::BridgeInfo Describe(const std::string& name, grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::DescribeBridgeRequest req;
    req.set_name(name);
    qpb::DescribeBridgeResponse resp;
    const grpc::Status s = bridges_->DescribeBridge(&ctx, req, &resp);
    if (status != nullptr) *status = s;
    return resp.bridge();
  }

  // Pause, resume or delete by name.
  template <typename Req, typename Resp>
  grpc::Status ByName(grpc::Status (qpb::Bridges::Stub::*method)(grpc::ClientContext*, const Req&,
                                                                 Resp*),
                      const std::string& name) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    Req req;
    req.set_name(name);
    Resp resp;
    return (bridges_.get()->*method)(&ctx, req, &resp);
  }

  qpb::GetQueueStatsResponse Stats(const std::string& queue) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::GetQueueStatsRequest req;
    req.set_queue(queue);
    qpb::GetQueueStatsResponse resp;
    (void)queue_->GetQueueStats(&ctx, req, &resp);
    return resp;
  }
  int64_t Jobs(const std::string& queue) {
    const qpb::GetQueueStatsResponse s = Stats(queue);
    return s.ready() + s.delayed() + s.leased();
  }

  // Leases up to `max` ready jobs for an hour (they stay out of the way while counted).
  std::vector<qpb::LeasedJob> LeaseAll(const std::string& queue, int max = 1000) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::LeaseRequest req;
    req.set_queue(queue);
    req.set_worker_id("test");
    req.set_max_jobs(max);
    req.mutable_visibility_timeout()->set_seconds(3600);
    qpb::LeaseResponse resp;
    if (!queue_->Lease(&ctx, req, &resp).ok()) return {};
    return {resp.jobs().begin(), resp.jobs().end()};
  }

  grpc::Status Ack(const std::string& queue, const qpb::LeasedJob& job) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::AckRequest req;
    req.set_queue(queue);
    req.set_job_id(job.job_id());
    req.set_lease_token(job.lease_token());
    qpb::AckResponse resp;
    return queue_->Ack(&ctx, req, &resp);
  }

  // A job's header value ("" when absent).
  static std::string HeaderOf(const qpb::LeasedJob& job, const std::string& key) {
    for (const auto& h : job.headers()) {
      if (h.key() == key) return h.value();
    }
    return "";
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<qpb::WorkQueue::Stub> queue_;
  std::unique_ptr<qpb::Bridges::Stub> bridges_;
};

}  // namespace conduit::testing
