#pragma once

#include "conduit/log/v1/replica.grpc.pb.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::api {

// gRPC adapter of conduit.log.v1.ReplicaService (callback API): a follower's fetch, answered
// by Broker::ReplicaFetch. Thread-safe; `broker` must outlive it.
class ReplicaService final : public ::conduit::log::v1::ReplicaService::CallbackService {
 public:
  explicit ReplicaService(Broker* broker) : broker_(broker) {}

  grpc::ServerUnaryReactor* ReplicaFetch(grpc::CallbackServerContext* ctx,
                                         const ::conduit::log::v1::ReplicaFetchRequest* request,
                                         ::conduit::log::v1::ReplicaFetchResponse* response) override;

 private:
  Broker* const broker_;
};

}  // namespace conduit::log_broker::api
