#pragma once

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/api/convert.h"
#include "services/log_broker/api/log_metrics.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::api {

// gRPC adapter of conduit.log.v1.LogService (callback API): converts each request, calls the
// Broker, converts the result back and finishes with the mapped status. Blocking work runs on
// the broker's storage executor; reactors finish from there.
//
// Thread-safe. `broker` and `metrics` must outlive the service.
class LogService final : public ::conduit::log::v1::LogService::CallbackService {
 public:
  LogService(Broker* broker, LogMetrics* metrics) : broker_(broker), metrics_(metrics) {}

  // Ends open Tail streams (within about a second) so a server shutdown can drain quickly.
  void BeginShutdown() { shutting_down_.store(true); }
  // The address the server serves on (GetMetadata names it on a single node).
  void SetAddress(const std::string& address) {
    absl::MutexLock lock(&address_mu_);
    address_ = address;
  }

  grpc::ServerUnaryReactor* CreateTopic(grpc::CallbackServerContext* ctx,
                                        const pb::CreateTopicRequest* request,
                                        pb::CreateTopicResponse* response) override;
  grpc::ServerUnaryReactor* DeleteTopic(grpc::CallbackServerContext* ctx,
                                        const pb::DeleteTopicRequest* request,
                                        pb::DeleteTopicResponse* response) override;
  grpc::ServerUnaryReactor* ListTopics(grpc::CallbackServerContext* ctx,
                                       const pb::ListTopicsRequest* request,
                                       pb::ListTopicsResponse* response) override;
  grpc::ServerUnaryReactor* DescribeTopic(grpc::CallbackServerContext* ctx,
                                          const pb::DescribeTopicRequest* request,
                                          pb::DescribeTopicResponse* response) override;
  grpc::ServerUnaryReactor* Produce(grpc::CallbackServerContext* ctx,
                                    const pb::ProduceRequest* request,
                                    pb::ProduceResponse* response) override;
  grpc::ServerBidiReactor<pb::ProduceStreamRequest, pb::ProduceStreamResponse>* ProduceStream(
      grpc::CallbackServerContext* ctx) override;  // produce_stream.cc
  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* ctx,
                                  const pb::FetchRequest* request,
                                  pb::FetchResponse* response) override;
  grpc::ServerWriteReactor<pb::TailResponse>* Tail(grpc::CallbackServerContext* ctx,
                                                   const pb::TailRequest* request) override;
  grpc::ServerUnaryReactor* ListOffsets(grpc::CallbackServerContext* ctx,
                                        const pb::ListOffsetsRequest* request,
                                        pb::ListOffsetsResponse* response) override;
  grpc::ServerUnaryReactor* UpdateTopicConfig(grpc::CallbackServerContext* ctx,
                                              const pb::UpdateTopicConfigRequest* request,
                                              pb::UpdateTopicConfigResponse* response) override;
  grpc::ServerUnaryReactor* InitProducer(grpc::CallbackServerContext* ctx,
                                         const pb::InitProducerRequest* request,
                                         pb::InitProducerResponse* response) override;
  grpc::ServerUnaryReactor* ReassignPartition(grpc::CallbackServerContext* ctx,
                                              const pb::ReassignPartitionRequest* request,
                                              pb::ReassignPartitionResponse* response) override;
  grpc::ServerUnaryReactor* GetMetadata(grpc::CallbackServerContext* ctx,
                                        const pb::GetMetadataRequest* request,
                                        pb::GetMetadataResponse* response) override;

 private:
  class TailReactor;
  class ProduceStreamReactor;

  Broker* const broker_;
  LogMetrics* const metrics_;
  std::atomic<bool> shutting_down_{false};
  absl::Mutex address_mu_;
  std::string address_ ABSL_GUARDED_BY(address_mu_);
};

}  // namespace conduit::log_broker::api
