#pragma once

#include "common/grpc/arena_allocator.h"
#include "common/grpc/call_guard.h"
#include "common/grpc/parsed_bidi_reactor.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::api {

namespace pb = ::conduit::queue::v1;

// gRPC adapter of conduit.queue.v1.WorkQueue (callback API): takes the authorise step
// (`guard`), converts, calls the domain, converts back, finishes with the mapped status.
// Operations on the queue named by the request: CreateQueue Create, DeleteQueue and
// DiscardDeadLetters Delete, GetQueueStats and the dead-letter listings Describe (payloads only
// with ViewPayload), Enqueue and AddDeadLetters Write, Lease/ExtendLease/Ack/AckBatch/Nack and
// Consume (at its start message) Read, RedriveDeadLetters Redrive and Write (Write on the topic
// when it redrives to one); ListQueues lists the queues the caller may Describe.
// Thread-safe; `queue` and `guard` must outlive it.
class QueueService final : public pb::WorkQueue::CallbackService {
 public:
  explicit QueueService(WorkQueue* queue,
                        const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open())
      : queue_(queue), guard_(guard) {
    SetMessageAllocatorFor_Enqueue(&enqueue_messages_);
    SetMessageAllocatorFor_Lease(&lease_messages_);
    SetMessageAllocatorFor_AckBatch(&ack_batch_messages_);
    // Consume parses its messages itself (grpc_util::ParsedBidiReactor): one that does not parse
    // fails the stream INVALID_ARGUMENT instead of looking like the worker's half-close.
    MarkMethodRawCallback(
        grpc_util::MethodIndex(pb::WorkQueue::service_full_name(), "Consume"),
        grpc_util::ServeParsed(
            [this](grpc::CallbackServerContext* ctx) { return ParsedConsume(ctx); }));
  }

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
  // Consume's handler (consume_stream.cc), in place of the generated typed one.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ParsedConsume(
      grpc::CallbackServerContext* ctx);
  // The guard's Check on queue `name`.
  absl::Status Allow(grpc::CallbackServerContext* ctx, const std::string& name,
                     security::Operation operation) const {
    return guard_.Check(*ctx, security::ResourceType::kQueue, name, operation);
  }
  bool MayViewPayload(grpc::CallbackServerContext* ctx, const std::string& name) const {
    return guard_.MayViewPayload(*ctx, security::ResourceType::kQueue, name);
  }
  WorkQueue* const queue_;
  const grpc_util::CallGuard& guard_;
  // The methods that carry many jobs parse and build them on a per-call arena.
  grpc_util::ArenaMessageAllocator<pb::EnqueueRequest, pb::EnqueueResponse> enqueue_messages_;
  grpc_util::ArenaMessageAllocator<pb::LeaseRequest, pb::LeaseResponse> lease_messages_;
  grpc_util::ArenaMessageAllocator<pb::AckBatchRequest, pb::AckBatchResponse> ack_batch_messages_;
};

}  // namespace conduit::work_queue::api
