#pragma once

#include "common/grpc/call_guard.h"
#include "conduit/log/v1/replica.grpc.pb.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::replication {

// gRPC adapter of conduit.log.v1.ReplicaService (callback API): a follower's fetch, answered
// by ReplicaManager::ReplicaFetch, after the authorise step (`guard`).
//
// ReplicaFetch needs Read on the cluster resource (grpc_util::kClusterResource), not on each
// topic: it is broker-to-broker traffic covering every partition the follower copies, and it
// returns whole records (values included, whatever ViewPayload says) because the follower must
// store them. With authorisation on, grant each broker's identity (its client certificate's or
// token's principal) `allow <principal> cluster literal conduit Read`; clients need no such
// grant and should not get one.
//
// Thread-safe; `broker` and `guard` must outlive it.
class ReplicaService final : public ::conduit::log::v1::ReplicaService::CallbackService {
 public:
  explicit ReplicaService(Broker* broker,
                          const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open())
      : broker_(broker), guard_(guard) {}

  grpc::ServerUnaryReactor* ReplicaFetch(
      grpc::CallbackServerContext* ctx, const ::conduit::log::v1::ReplicaFetchRequest* request,
      ::conduit::log::v1::ReplicaFetchResponse* response) override;

 private:
  Broker* const broker_;
  const grpc_util::CallGuard& guard_;
};

}  // namespace conduit::log_broker::replication
