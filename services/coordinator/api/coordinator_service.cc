#include "services/coordinator/api/coordinator_service.h"

#include <charconv>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/reply.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "services/coordinator/api/convert.h"

namespace conduit::coordinator::api {

using grpc_util::ToGrpcStatus;
using security::Operation;
using security::ResourceType;

using grpc_util::FinishNow;

absl::StatusOr<std::optional<std::string>> CoordinatorService::CallerOf(
    grpc::CallbackServerContext* ctx) const {
  if (guard_.authorizing()) return guard_.PrincipalOf(*ctx);
  // Without ACLs only the caller's identity can be refused, and the guard's Check decides it as
  // for any other call; the resource named here does not matter.
  if (auto s = guard_.CheckCluster(*ctx, Operation::kDescribe); !s.ok()) return s;
  return std::nullopt;
}

absl::Status CoordinatorService::Allow(const std::optional<std::string>& caller, ResourceType type,
                                       absl::string_view name, Operation operation) const {
  if (!caller.has_value()) return absl::OkStatus();
  return guard_.Check(*caller, type, name, operation);
}

absl::Status CoordinatorService::AllowGroupAndTopics(grpc::CallbackServerContext* ctx,
                                                     const std::string& group_id,
                                                     Operation group_operation,
                                                     const std::vector<absl::string_view>& topics,
                                                     Operation topic_operation) const {
  if (topics.empty()) return AllowGroup(ctx, group_id, group_operation);
  auto caller = CallerOf(ctx);
  if (!caller.ok()) return caller.status();
  // Open (no ACLs): nothing to refuse; the guard's Check still notes an admin operation.
  if (!caller->has_value()) return AllowGroup(ctx, group_id, group_operation);
  // Each check noted for the audit trail, the caller decided once.
  if (auto s = guard_.Check(*ctx, **caller, ResourceType::kGroup, group_id, group_operation);
      !s.ok()) {
    return s;
  }
  for (absl::string_view topic : topics) {
    if (auto s = guard_.Check(*ctx, **caller, ResourceType::kTopic, topic, topic_operation);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CoordinatorService::AllowGroupAndTopics(const std::optional<std::string>& caller,
                                                     const std::string& group_id,
                                                     Operation group_operation,
                                                     const std::vector<absl::string_view>& topics,
                                                     Operation topic_operation) const {
  if (auto s = Allow(caller, ResourceType::kGroup, group_id, group_operation); !s.ok()) return s;
  for (absl::string_view topic : topics) {
    if (auto s = Allow(caller, ResourceType::kTopic, topic, topic_operation); !s.ok()) return s;
  }
  return absl::OkStatus();
}

template <typename Work>
grpc::ServerUnaryReactor* CoordinatorService::RunAsync(grpc::CallbackServerContext* ctx,
                                                       const google::protobuf::Message& request,
                                                       Work work) {
  if (auto s = grpc_util::CheckTimeFields(request); !s.ok()) return FinishNow(ctx, s);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // A call that waited in the queue past its deadline is not started: its caller has gone.
  const absl::Time deadline = absl::FromChrono(ctx->deadline());
  if (!scope_->Submit([reactor, deadline, work = std::move(work)]() mutable {
        if (absl::Now() >= deadline) {
          reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       "the call's deadline passed while it waited to run; "
                                       "nothing was changed"));
          return;
        }
        work(deadline, reactor);
      })) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "the coordinator is overloaded; retry with backoff"));
  }
  return reactor;
}

template <typename Work>
grpc::ServerUnaryReactor* CoordinatorService::Run(grpc::CallbackServerContext* ctx,
                                                  const google::protobuf::Message& request,
                                                  Work work) {
  return RunAsync(
      ctx, request,
      [work = std::move(work)](absl::Time deadline, grpc::ServerUnaryReactor* reactor) mutable {
        reactor->Finish(ToGrpcStatus(work(deadline)));
      });
}

grpc::ServerUnaryReactor* CoordinatorService::Heartbeat(grpc::CallbackServerContext* ctx,
                                                        const pb::HeartbeatRequest* req,
                                                        pb::HeartbeatResponse* resp) {
  if (auto s = AllowGroupAndTopics(
          ctx, req->group_id(), Operation::kRead,
          {req->subscribed_topics().begin(), req->subscribed_topics().end()}, Operation::kDescribe);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  return RunAsync(ctx, *req,
                  [this, req, resp, peer = ctx->peer()](absl::Time deadline,
                                                        grpc::ServerUnaryReactor* reactor) {
                    auto in = FromProto(*req, peer);
                    if (!in.ok()) return reactor->Finish(ToGrpcStatus(in.status()));
                    in->deadline = deadline;
                    coordinator_->Heartbeat(*in, [resp, reactor](auto out) {
                      if (out.ok()) ToProto(*out, resp);
                      reactor->Finish(ToGrpcStatus(out.status()));
                    });
                  });
}

grpc::ServerUnaryReactor* CoordinatorService::LeaveGroup(grpc::CallbackServerContext* ctx,
                                                         const pb::LeaveGroupRequest* req,
                                                         pb::LeaveGroupResponse*) {
  if (auto s = AllowGroup(ctx, req->group_id(), Operation::kRead); !s.ok())
    return FinishNow(ctx, s);
  return Run(ctx, *req, [this, req](absl::Time) {
    return coordinator_->Leave(req->group_id(), req->member_id());
  });
}

grpc::ServerUnaryReactor* CoordinatorService::CommitOffsets(grpc::CallbackServerContext* ctx,
                                                            const pb::CommitOffsetsRequest* req,
                                                            pb::CommitOffsetsResponse*) {
  std::vector<absl::string_view> topics;
  for (const pb::TopicCommits& t : req->topics()) topics.push_back(t.topic());
  if (auto s =
          AllowGroupAndTopics(ctx, req->group_id(), Operation::kRead, topics, Operation::kRead);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  return RunAsync(ctx, *req, [this, req](absl::Time deadline, grpc::ServerUnaryReactor* reactor) {
    CommitInput in = FromProto(*req);
    in.deadline = deadline;
    coordinator_->Commit(in, [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  });
}

grpc::ServerUnaryReactor* CoordinatorService::FetchOffsets(grpc::CallbackServerContext* ctx,
                                                           const pb::FetchOffsetsRequest* req,
                                                           pb::FetchOffsetsResponse* resp) {
  auto caller = CallerOf(ctx);
  if (!caller.ok()) return FinishNow(ctx, caller.status());
  if (auto s =
          AllowGroupAndTopics(*caller, req->group_id(), Operation::kDescribe,
                              {req->topics().begin(), req->topics().end()}, Operation::kDescribe);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  return Run(ctx, *req, [this, req, resp, caller = *std::move(caller)](absl::Time) -> absl::Status {
    std::vector<std::string> topics(req->topics().begin(), req->topics().end());
    auto offsets = coordinator_->FetchOffsets(req->group_id(), topics);
    if (!offsets.ok()) return offsets.status();
    // With no topics named, every topic's offsets came back: keep those of the topics the caller
    // may Describe (as Kafka's OffsetFetch of all topics does). Named topics were checked above.
    const std::string* checked = nullptr;  // the last topic checked, and its answer
    bool visible = true;
    for (const OffsetRecord& o : *offsets) {
      if (checked == nullptr || *checked != o.tp.topic) {
        checked = &o.tp.topic;
        visible = Allow(caller, ResourceType::kTopic, o.tp.topic, Operation::kDescribe).ok();
      }
      if (visible) ToProto(o, resp->add_offsets());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::DescribeGroup(grpc::CallbackServerContext* ctx,
                                                            const pb::DescribeGroupRequest* req,
                                                            pb::DescribeGroupResponse* resp) {
  if (auto s = AllowGroup(ctx, req->group_id(), Operation::kDescribe); !s.ok()) {
    return FinishNow(ctx, s);
  }
  return Run(ctx, *req, [this, req, resp](absl::Time) -> absl::Status {
    auto description = coordinator_->Describe(req->group_id());
    if (!description.ok()) return description.status();
    ToProto(*description, resp);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::ListGroups(grpc::CallbackServerContext* ctx,
                                                         const pb::ListGroupsRequest* req,
                                                         pb::ListGroupsResponse* resp) {
  auto caller = CallerOf(ctx);
  if (!caller.ok()) return FinishNow(ctx, caller.status());
  return Run(ctx, *req, [this, resp, caller = *std::move(caller)](absl::Time) -> absl::Status {
    for (const GroupListing& g : coordinator_->List()) {
      if (!Allow(caller, ResourceType::kGroup, g.group_id, Operation::kDescribe).ok()) continue;
      pb::GroupListing* l = resp->add_groups();
      l->set_group_id(g.group_id);
      l->set_state(ToProto(g.state));
      l->set_group_epoch(g.epoch.value());
      l->set_members(g.members);
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CoordinatorService::DeleteGroup(grpc::CallbackServerContext* ctx,
                                                          const pb::DeleteGroupRequest* req,
                                                          pb::DeleteGroupResponse*) {
  if (auto s = AllowGroup(ctx, req->group_id(), Operation::kDelete); !s.ok()) {
    return FinishNow(ctx, s);
  }
  return Run(ctx, *req,
             [this, req](absl::Time) { return coordinator_->DeleteGroup(req->group_id()); });
}

grpc::ServerUnaryReactor* CoordinatorService::ResetOffsets(grpc::CallbackServerContext* ctx,
                                                           const pb::ResetOffsetsRequest* req,
                                                           pb::ResetOffsetsResponse* resp) {
  if (auto s = AllowGroupAndTopics(ctx, req->group_id(), Operation::kAlter, {req->topic()},
                                   Operation::kDescribe);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  return Run(
      ctx, *req, [this, ctx, req, resp, peer = ctx->peer()](absl::Time deadline) -> absl::Status {
        auto in = FromProto(*req, peer);
        if (!in.ok()) return in.status();
        in->deadline = deadline;
        auto out = coordinator_->ResetOffsets(*in);
        if (!out.ok()) return out.status();
        // The security audit trail points at the group's own audit record (ListGroupAudit).
        guard_.AuditDetail(*ctx, absl::StrCat("group '", req->group_id(), "' offset reset ",
                                              out->executed ? "executed" : "planned (dry run)",
                                              ", group audit id ", out->audit_id));
        resp->set_executed(out->executed);
        resp->set_topic(req->topic());
        for (const PartitionReset& r : out->partitions) ToProto(r, resp->add_partitions());
        resp->set_group_epoch(out->group_epoch.value());
        resp->set_audit_id(out->audit_id);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* CoordinatorService::ListGroupAudit(grpc::CallbackServerContext* ctx,
                                                             const pb::ListGroupAuditRequest* req,
                                                             pb::ListGroupAuditResponse* resp) {
  if (auto s = AllowGroup(ctx, req->group_id(), Operation::kDescribe); !s.ok()) {
    return FinishNow(ctx, s);
  }
  return Run(ctx, *req, [this, req, resp](absl::Time) -> absl::Status {
    if (req->page_size() < 0 || req->page_size() > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_size ", req->page_size(), " is outside [0, 1000]"));
    }
    const int limit = req->page_size() == 0 ? 100 : req->page_size();
    uint64_t before = 0;
    const std::string& token = req->page_token();
    if (!token.empty()) {
      auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), before);
      if (ec != std::errc() || end != token.data() + token.size() || before == 0) {
        return absl::InvalidArgumentError(absl::StrCat("page_token '", token, "' is not valid"));
      }
    }
    auto entries = coordinator_->ListAudit(req->group_id(), before, limit + 1);
    if (!entries.ok()) return entries.status();
    const bool more = static_cast<int>(entries->size()) > limit;
    if (more) entries->pop_back();
    for (const AuditRecord& a : *entries) ToProto(a, resp->add_entries());
    if (more) resp->set_next_page_token(std::to_string(entries->back().id));
    return absl::OkStatus();
  });
}

}  // namespace conduit::coordinator::api
