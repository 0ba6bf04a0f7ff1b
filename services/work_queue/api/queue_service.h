#pragma once

#include "conduit/queue/v1/queue.grpc.pb.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::api {

namespace pb = ::conduit::queue::v1;

// gRPC adapter of conduit.queue.v1.WorkQueue (callback API): converts, calls the domain,
// converts back, finishes with the mapped status. Thread-safe; `queue` must outlive it.
class QueueService final : public pb::WorkQueue::CallbackService {
 public:
  explicit QueueService(WorkQueue* queue) : queue_(queue) {}

  grpc::ServerUnaryReactor* CreateQueue(grpc::CallbackServerContext*, const pb::CreateQueueRequest*,
                                        pb::CreateQueueResponse*) override;
  grpc::ServerUnaryReactor* DeleteQueue(grpc::CallbackServerContext*, const pb::DeleteQueueRequest*,
                                        pb::DeleteQueueResponse*) override;
  grpc::ServerUnaryReactor* ListQueues(grpc::CallbackServerContext*, const pb::ListQueuesRequest*,
                                       pb::ListQueuesResponse*) override;
  grpc::ServerUnaryReactor* GetQueueStats(grpc::CallbackServerContext*,
                                          const pb::GetQueueStatsRequest*,
                                          pb::GetQueueStatsResponse*) override;
  grpc::ServerUnaryReactor* Enqueue(grpc::CallbackServerContext*, const pb::EnqueueRequest*,
                                    pb::EnqueueResponse*) override;
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext*, const pb::LeaseRequest*,
                                  pb::LeaseResponse*) override;
  grpc::ServerUnaryReactor* ExtendLease(grpc::CallbackServerContext*, const pb::ExtendLeaseRequest*,
                                        pb::ExtendLeaseResponse*) override;
  grpc::ServerUnaryReactor* Ack(grpc::CallbackServerContext*, const pb::AckRequest*,
                                pb::AckResponse*) override;
  grpc::ServerUnaryReactor* AckBatch(grpc::CallbackServerContext*, const pb::AckBatchRequest*,
                                     pb::AckBatchResponse*) override;
  grpc::ServerUnaryReactor* Nack(grpc::CallbackServerContext*, const pb::NackRequest*,
                                 pb::NackResponse*) override;
  grpc::ServerBidiReactor<pb::ConsumeRequest, pb::ConsumeResponse>* Consume(
      grpc::CallbackServerContext*) override;  // consume_stream.cc
  grpc::ServerUnaryReactor* ListDeadLetters(grpc::CallbackServerContext*,
                                            const pb::ListDeadLettersRequest*,
                                            pb::ListDeadLettersResponse*) override;
  grpc::ServerUnaryReactor* GetDeadLetter(grpc::CallbackServerContext*,
                                          const pb::GetDeadLetterRequest*,
                                          pb::GetDeadLetterResponse*) override;
  grpc::ServerUnaryReactor* RedriveDeadLetters(grpc::CallbackServerContext*,
                                               const pb::RedriveDeadLettersRequest*,
                                               pb::RedriveDeadLettersResponse*) override;
  grpc::ServerUnaryReactor* DiscardDeadLetters(grpc::CallbackServerContext*,
                                               const pb::DiscardDeadLettersRequest*,
                                               pb::DiscardDeadLettersResponse*) override;
  grpc::ServerUnaryReactor* AddDeadLetters(grpc::CallbackServerContext*,
                                           const pb::AddDeadLettersRequest*,
                                           pb::AddDeadLettersResponse*) override;

 private:
  class ConsumeReactor;
  WorkQueue* const queue_;
};

}  // namespace conduit::work_queue::api
