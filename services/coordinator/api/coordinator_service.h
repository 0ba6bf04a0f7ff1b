#pragma once

#include "common/runtime/runtime.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "services/coordinator/domain/group_coordinator.h"

namespace conduit::coordinator::api {

namespace pb = ::conduit::coordinator::v1;

// gRPC adapter of conduit.coordinator.v1.GroupCoordinator (callback API). Each call is handed
// to `scope` (the runtime's remote pool), because the domain may wait on the broker; a full
// scope answers RESOURCE_EXHAUSTED. Thread-safe; both must outlive it.
class CoordinatorService final : public pb::GroupCoordinator::CallbackService {
 public:
  CoordinatorService(GroupCoordinator* coordinator, runtime::Scope* scope)
      : coordinator_(coordinator), scope_(scope) {}

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext*, const pb::HeartbeatRequest*,
                                      pb::HeartbeatResponse*) override;
  grpc::ServerUnaryReactor* LeaveGroup(grpc::CallbackServerContext*, const pb::LeaveGroupRequest*,
                                       pb::LeaveGroupResponse*) override;
  grpc::ServerUnaryReactor* CommitOffsets(grpc::CallbackServerContext*,
                                          const pb::CommitOffsetsRequest*,
                                          pb::CommitOffsetsResponse*) override;
  grpc::ServerUnaryReactor* FetchOffsets(grpc::CallbackServerContext*,
                                         const pb::FetchOffsetsRequest*,
                                         pb::FetchOffsetsResponse*) override;
  grpc::ServerUnaryReactor* DescribeGroup(grpc::CallbackServerContext*,
                                          const pb::DescribeGroupRequest*,
                                          pb::DescribeGroupResponse*) override;
  grpc::ServerUnaryReactor* ListGroups(grpc::CallbackServerContext*, const pb::ListGroupsRequest*,
                                       pb::ListGroupsResponse*) override;
  grpc::ServerUnaryReactor* DeleteGroup(grpc::CallbackServerContext*,
                                        const pb::DeleteGroupRequest*,
                                        pb::DeleteGroupResponse*) override;
  grpc::ServerUnaryReactor* ResetOffsets(grpc::CallbackServerContext*,
                                         const pb::ResetOffsetsRequest*,
                                         pb::ResetOffsetsResponse*) override;
  grpc::ServerUnaryReactor* ListGroupAudit(grpc::CallbackServerContext*,
                                           const pb::ListGroupAuditRequest*,
                                           pb::ListGroupAuditResponse*) override;

 private:
  // Checks the request's times, then runs `work(deadline)` (returning absl::Status, filling the
  // response) on the scope and finishes. A call whose deadline passes while it waits for a
  // thread is answered DEADLINE_EXCEEDED without running.
  template <typename Work>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* ctx,
                                const google::protobuf::Message& request, Work work);
  // The same, for work that finishes the reactor itself: `work(deadline, reactor)` returns once
  // its change is queued, and the commit log's callback finishes the call when it is durable,
  // so no executor thread waits for an fsync.
  template <typename Work>
  grpc::ServerUnaryReactor* RunAsync(grpc::CallbackServerContext* ctx,
                                     const google::protobuf::Message& request, Work work);

  GroupCoordinator* const coordinator_;
  runtime::Scope* const scope_;
};

}  // namespace conduit::coordinator::api
