#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/grpc/call_guard.h"
#include "common/runtime/runtime.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "services/coordinator/domain/group_coordinator.h"

namespace conduit::coordinator::api {

namespace pb = ::conduit::coordinator::v1;

// gRPC adapter of conduit.coordinator.v1.GroupCoordinator (callback API). Each call first takes
// the authorise step (`guard`) on the gRPC thread, so a refused call (UNAUTHENTICATED or
// PERMISSION_DENIED) never queues; then it is handed to `scope` (the runtime's remote pool),
// because the domain may wait on the broker; a full scope answers RESOURCE_EXHAUSTED.
// Operations, as Kafka checks them (group = the request's group_id):
// - Heartbeat (join and keep alive) and LeaveGroup: Read on the group; a Heartbeat
//   that names subscribed topics also needs Describe on each.
// - CommitOffsets: Read on the group and Read on each topic it commits.
// - FetchOffsets: Describe on the group and on each topic named; with no topics named, only the
//   offsets of topics the caller may Describe come back.
// - DescribeGroup and ListGroupAudit: Describe on the group. ListGroups: only the groups the
//   caller may Describe.
// - DeleteGroup: Delete on the group.
// - ResetOffsets (dry run too): Alter on the group, Describe on the topic.
// Thread-safe; `coordinator`, `scope` and `guard` must outlive it.
class CoordinatorService final : public pb::GroupCoordinator::CallbackService {
 public:
  CoordinatorService(GroupCoordinator* coordinator, runtime::Scope* scope,
                     const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open())
      : coordinator_(coordinator), scope_(scope), guard_(guard) {}

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
  grpc::ServerUnaryReactor* DeleteGroup(grpc::CallbackServerContext*, const pb::DeleteGroupRequest*,
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

  // The guard's Check on group `group_id`.
  absl::Status AllowGroup(grpc::CallbackServerContext* ctx, const std::string& group_id,
                          security::Operation operation) const {
    return guard_.Check(*ctx, security::ResourceType::kGroup, group_id, operation);
  }
  // The caller, decided once for a call that checks several resources (one token verification,
  // not one per resource). nullopt when the guard does not authorise: every caller it lets in
  // may then do everything. UNAUTHENTICATED when the guard refuses the caller, exactly as its
  // Check(ctx, ...) would (an open guard refuses nobody, bearer token or not).
  absl::StatusOr<std::optional<std::string>> CallerOf(grpc::CallbackServerContext* ctx) const;
  // OK when `caller` (from CallerOf) may do `operation` on the resource, or when it is nullopt;
  // PERMISSION_DENIED otherwise.
  absl::Status Allow(const std::optional<std::string>& caller, security::ResourceType type,
                     absl::string_view name, security::Operation operation) const;
  // `group_operation` on group `group_id`, then `topic_operation` on each of `topics`, the caller
  // decided once: OK, or the first refusal (UNAUTHENTICATED or PERMISSION_DENIED).
  absl::Status AllowGroupAndTopics(grpc::CallbackServerContext* ctx, const std::string& group_id,
                                   security::Operation group_operation,
                                   const std::vector<absl::string_view>& topics,
                                   security::Operation topic_operation) const;
  // The same for a caller already decided (CallerOf): OK or PERMISSION_DENIED.
  absl::Status AllowGroupAndTopics(const std::optional<std::string>& caller,
                                   const std::string& group_id, security::Operation group_operation,
                                   const std::vector<absl::string_view>& topics,
                                   security::Operation topic_operation) const;

  GroupCoordinator* const coordinator_;
  runtime::Scope* const scope_;
  const grpc_util::CallGuard& guard_;
};

}  // namespace conduit::coordinator::api
