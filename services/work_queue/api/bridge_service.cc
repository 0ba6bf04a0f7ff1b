#include "services/work_queue/api/bridge_service.h"

#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "services/work_queue/api/reactors.h"

namespace conduit::work_queue::api {
namespace {

using grpc_util::SetTimestamp;

BridgeSpec FromProto(const bpb::BridgeSpec& s) {
  BridgeSpec spec;
  spec.name = s.name();
  spec.topic = s.topic();
  spec.group = s.group();
  spec.queue = s.queue();
  spec.key_prefix = s.filter().key_prefix();
  spec.header = s.filter().header();
  spec.header_value = s.filter().header_value();
  spec.tenant_header = s.tenant_header();
  spec.priority_header = s.priority_header();
  return spec;
}

bpb::BridgeState ToProto(bridge::BridgeRunState s) {
  switch (s) {
    case bridge::BridgeRunState::kRunning:
      return bpb::BRIDGE_STATE_RUNNING;
    case bridge::BridgeRunState::kPaused:
      return bpb::BRIDGE_STATE_PAUSED;
    case bridge::BridgeRunState::kBackingOff:
      return bpb::BRIDGE_STATE_BACKING_OFF;
    case bridge::BridgeRunState::kFailing:
      return bpb::BRIDGE_STATE_FAILING;
  }
  return bpb::BRIDGE_STATE_UNSPECIFIED;
}

void ToProto(const bridge::BridgeInfo& info, bpb::BridgeInfo* out) {
  const BridgeSpec& s = info.spec;
  bpb::BridgeSpec* spec = out->mutable_spec();
  spec->set_name(s.name);
  spec->set_topic(s.topic);
  spec->set_group(s.group);
  spec->set_queue(s.queue);
  spec->mutable_filter()->set_key_prefix(s.key_prefix);
  spec->mutable_filter()->set_header(s.header);
  spec->mutable_filter()->set_header_value(s.header_value);
  spec->set_tenant_header(s.tenant_header);
  spec->set_priority_header(s.priority_header);
  out->set_state(ToProto(info.status.state));
  SetTimestamp(s.created, out->mutable_created());
  out->set_records_bridged(info.status.bridged);
  out->set_records_filtered(info.status.filtered);
  if (info.lag) {
    out->set_lag_records(info.lag->records);
    out->set_lag_seconds(info.lag->seconds);
  }
  out->set_lag_error(info.lag_error);
  out->set_last_error(info.status.last_error);
  if (info.status.last_error_time != absl::InfinitePast()) {
    SetTimestamp(info.status.last_error_time, out->mutable_last_error_time());
  }
}

}  // namespace

grpc::ServerUnaryReactor* BridgeService::CreateBridge(grpc::CallbackServerContext* ctx,
                                                      const bpb::CreateBridgeRequest* request,
                                                      bpb::CreateBridgeResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = guard_.Check(*ctx, security::ResourceType::kTopic, request->spec().topic(),
                            security::Operation::kRead);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  if (auto s = guard_.Check(*ctx, security::ResourceType::kQueue, request->spec().queue(),
                            security::Operation::kWrite);
      !s.ok()) {
    return FinishNow(ctx, s);
  }
  auto created = bridges_->Create(FromProto(request->spec()));
  if (created.ok()) ToProto(*created, response->mutable_bridge());
  return FinishNow(ctx, created.status());
}

grpc::ServerUnaryReactor* BridgeService::ListBridges(grpc::CallbackServerContext* ctx,
                                                     const bpb::ListBridgesRequest*,
                                                     bpb::ListBridgesResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kDescribe); !s.ok())
    return FinishNow(ctx, s);
  for (const auto& info : bridges_->List()) ToProto(info, response->add_bridges());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* BridgeService::DescribeBridge(grpc::CallbackServerContext* ctx,
                                                        const bpb::DescribeBridgeRequest* request,
                                                        bpb::DescribeBridgeResponse* response) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kDescribe); !s.ok())
    return FinishNow(ctx, s);
  auto info = bridges_->Describe(request->name());
  if (info.ok()) ToProto(*info, response->mutable_bridge());
  return FinishNow(ctx, info.status());
}

grpc::ServerUnaryReactor* BridgeService::PauseBridge(grpc::CallbackServerContext* ctx,
                                                     const bpb::PauseBridgeRequest* request,
                                                     bpb::PauseBridgeResponse*) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return FinishNow(ctx, s);
  return FinishNow(ctx, bridges_->Pause(request->name()));
}

grpc::ServerUnaryReactor* BridgeService::ResumeBridge(grpc::CallbackServerContext* ctx,
                                                      const bpb::ResumeBridgeRequest* request,
                                                      bpb::ResumeBridgeResponse*) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return FinishNow(ctx, s);
  return FinishNow(ctx, bridges_->Resume(request->name()));
}

grpc::ServerUnaryReactor* BridgeService::DeleteBridge(grpc::CallbackServerContext* ctx,
                                                      const bpb::DeleteBridgeRequest* request,
                                                      bpb::DeleteBridgeResponse*) {
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kAlter); !s.ok())
    return FinishNow(ctx, s);
  return FinishNow(ctx, bridges_->Delete(request->name()));
}

}  // namespace conduit::work_queue::api
