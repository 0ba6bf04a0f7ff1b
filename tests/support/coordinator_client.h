#pragma once

// Small synchronous helpers over the generated GroupCoordinator stub, for tests and benchmarks.
// Every call carries a deadline.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"

namespace conduit::testing {

namespace cpb = ::conduit::coordinator::v1;

class CoordinatorClient {
 public:
  explicit CoordinatorClient(const std::string& address)
      : stub_(cpb::GroupCoordinator::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  cpb::GroupCoordinator::Stub* stub() { return stub_.get(); }

  static void SetDeadline(grpc::ClientContext* ctx, absl::Duration d = absl::Seconds(10)) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
  }

  // Joins `group` subscribed to `topics` (member_epoch 0).
  grpc::Status Join(const std::string& group, const std::vector<std::string>& topics,
                    cpb::HeartbeatResponse* out, absl::Duration session = absl::Seconds(30),
                    const std::string& instance_id = "") {
    cpb::HeartbeatRequest req;
    req.set_group_id(group);
    for (const std::string& t : topics) req.add_subscribed_topics(t);
    const int64_t nanos = absl::ToInt64Nanoseconds(session);
    req.mutable_session_timeout()->set_seconds(nanos / 1'000'000'000);
    req.mutable_session_timeout()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
    req.set_instance_id(instance_id);
    return Call(&cpb::GroupCoordinator::Stub::Heartbeat, req, out);
  }
  // A heartbeat from the member of `last` reporting that it owns what `last` assigned.
  grpc::Status Beat(const std::string& group, const cpb::HeartbeatResponse& last,
                    cpb::HeartbeatResponse* out) {
    cpb::HeartbeatRequest req;
    req.set_group_id(group);
    req.set_member_id(last.member_id());
    req.set_member_epoch(last.member_epoch());
    *req.mutable_owned_partitions() = last.assignment();
    return Call(&cpb::GroupCoordinator::Stub::Heartbeat, req, out);
  }
  grpc::Status Commit(const std::string& group, const std::string& member_id, int32_t epoch,
                      const std::string& topic, int32_t partition, int64_t offset) {
    cpb::CommitOffsetsRequest req;
    req.set_group_id(group);
    req.set_member_id(member_id);
    req.set_member_epoch(epoch);
    auto* t = req.add_topics();
    t->set_topic(topic);
    auto* p = t->add_partitions();
    p->set_partition(partition);
    p->set_offset(offset);
    cpb::CommitOffsetsResponse resp;
    return Call(&cpb::GroupCoordinator::Stub::CommitOffsets, req, &resp);
  }
  grpc::Status FetchOffsets(const std::string& group, cpb::FetchOffsetsResponse* out) {
    cpb::FetchOffsetsRequest req;
    req.set_group_id(group);
    return Call(&cpb::GroupCoordinator::Stub::FetchOffsets, req, out);
  }
  grpc::Status Describe(const std::string& group, cpb::DescribeGroupResponse* out) {
    cpb::DescribeGroupRequest req;
    req.set_group_id(group);
    return Call(&cpb::GroupCoordinator::Stub::DescribeGroup, req, out);
  }

  template <typename Method, typename Req, typename Resp>
  grpc::Status Call(Method method, const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return (stub_.get()->*method)(&ctx, req, resp);
  }

 private:
  std::unique_ptr<cpb::GroupCoordinator::Stub> stub_;
};

}  // namespace conduit::testing
