#include "services/log_broker/replication/replica_service.h"

#include <utility>

#include "common/grpc/proto_time.h"
#include "common/grpc/reply.h"
#include "common/grpc/status.h"
#include "services/log_broker/replication/replica_convert.h"

namespace conduit::log_broker::replication {

grpc::ServerUnaryReactor* ReplicaService::ReplicaFetch(grpc::CallbackServerContext* ctx,
                                                       const pb::ReplicaFetchRequest* request,
                                                       pb::ReplicaFetchResponse* response) {
  // Brokers only (see the class comment): Read on the cluster, not on each topic.
  if (auto s = guard_.CheckCluster(*ctx, security::Operation::kRead); !s.ok()) {
    return grpc_util::FinishNow(ctx, s);
  }
  auto* reactor = ctx->DefaultReactor();
  const absl::Duration max_wait =
      std::min(grpc_util::FromDuration(request->max_wait()), absl::Seconds(10));
  absl::Status status = broker_->replicas().ReplicaFetch(
      request->follower(), FromProto(*request), request->max_bytes(), max_wait,
      [reactor, response](std::vector<ReplicaFetchData> data) {
        ToProto(std::move(data), response);
        reactor->Finish(grpc::Status::OK);
      });
  if (!status.ok()) reactor->Finish(grpc_util::ToGrpcStatus(status));
  return reactor;
}

}  // namespace conduit::log_broker::replication
