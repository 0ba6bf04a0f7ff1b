#pragma once

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/arena_allocator.h"
#include "common/grpc/call_guard.h"
#include "common/grpc/parsed_bidi_reactor.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/api/convert.h"
#include "services/log_broker/api/log_metrics.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::api {

// gRPC adapter of conduit.log.v1.LogService (callback API): takes the authorise step (`guard`),
// converts each request, calls the Broker, converts the result back and finishes with the mapped
// status. Blocking work runs on the broker's storage executor; reactors finish from there.
//
// Operations on the topic named by the request: CreateTopic Create, DeleteTopic Delete,
// DescribeTopic and ListOffsets Describe, UpdateTopicConfig Alter, Produce Write, ProduceStream
// Write (checked when a topic first appears on the stream; a refused message is answered with
// its status and the stream goes on), Fetch Read, Tail Read (at its start, before any record is
// sent). Fetch and Tail return record values only with ViewPayload (keys, headers and offsets
// always). ListTopics and GetMetadata (any identified caller; the brokers always) list the
// topics the caller may Describe. On the cluster resource (grpc_util::kClusterResource):
// InitProducer Write (its request names no topic), ReassignPartition Alter.
//
// Thread-safe. `broker`, `metrics` and `guard` must outlive the service.
class LogService final : public ::conduit::log::v1::LogService::CallbackService {
 public:
  LogService(Broker* broker, LogMetrics* metrics,
             const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open())
      : broker_(broker), metrics_(metrics), guard_(guard) {
    SetMessageAllocatorFor_Produce(&produce_messages_);
    SetMessageAllocatorFor_Fetch(&fetch_messages_);
    // ProduceStream parses its messages itself (grpc_util::ParsedBidiReactor): one that does not
    // parse ends the stream INVALID_ARGUMENT instead of looking like the caller's half-close.
    MarkMethodRawCallback(
        grpc_util::MethodIndex(pb::LogService::service_full_name(), "ProduceStream"),
        grpc_util::ServeParsed(
            [this](grpc::CallbackServerContext* ctx) { return ParsedProduceStream(ctx); }));
  }

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
  grpc::ServerUnaryReactor* Fetch(grpc::CallbackServerContext* ctx, const pb::FetchRequest* request,
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
  // ProduceStream's handler (produce_stream.cc), in place of the generated typed one.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ParsedProduceStream(
      grpc::CallbackServerContext* ctx);

  // The guard's Check on topic `name`.
  absl::Status Allow(grpc::CallbackServerContext* ctx, const std::string& name,
                     security::Operation operation) const {
    return guard_.Check(*ctx, security::ResourceType::kTopic, name, operation);
  }
  bool MayViewPayload(grpc::CallbackServerContext* ctx, const std::string& topic) const {
    return guard_.MayViewPayload(*ctx, security::ResourceType::kTopic, topic);
  }

  Broker* const broker_;
  LogMetrics* const metrics_;
  const grpc_util::CallGuard& guard_;
  // A batch's records (Produce) and a Fetch's records are parsed and built on a per-call arena.
  grpc_util::ArenaMessageAllocator<pb::ProduceRequest, pb::ProduceResponse> produce_messages_;
  grpc_util::ArenaMessageAllocator<pb::FetchRequest, pb::FetchResponse> fetch_messages_;
  std::atomic<bool> shutting_down_{false};
  absl::Mutex address_mu_;
  std::string address_ ABSL_GUARDED_BY(address_mu_);
};

}  // namespace conduit::log_broker::api
