#pragma once

// Small helpers the work queue's gRPC adapters share: finishing a unary reactor from a domain
// callback (a status at hand: grpc_util::FinishNow), and the NewJob conversion (Enqueue,
// AddDeadLetters).

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/status/status.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/reply.h"
#include "common/grpc/status.h"
#include "conduit/queue/v1/queue.pb.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::api {

// Finishes `reactor` with the callback's status after `fill` converts a good result.
template <typename T, typename Fill>
Callback<T> Finisher(grpc::ServerUnaryReactor* reactor, Fill fill) {
  return [reactor, fill](absl::StatusOr<T> result) {
    if (result.ok()) fill(*result);
    reactor->Finish(grpc_util::ToGrpcStatus(result.status()));
  };
}

// Finishes with each job's id (and whether it was a duplicate) in `response->jobs`.
template <typename Response>
Callback<std::vector<EnqueuedJob>> EnqueuedFinisher(grpc::ServerUnaryReactor* reactor,
                                                    Response* response) {
  return Finisher<std::vector<EnqueuedJob>>(reactor, [response](const auto& out) {
    for (const EnqueuedJob& e : out) {
      auto* p = response->add_jobs();
      p->set_job_id(e.id);
      p->set_duplicate(e.duplicate);
    }
  });
}

using grpc_util::FinishNow;

// A leased job as Lease and Consume deliver it.
void ToLeasedJob(const Job& job, ::conduit::queue::v1::LeasedJob* out);
// INVALID_ARGUMENT for a failure class that is not one.
absl::StatusOr<NackArgs> NackArgsFromProto(const ::conduit::queue::v1::NackRequest& request);

// Moves the strings out: the request is the call's and unused afterwards.
inline NewJob FromProto(::conduit::queue::v1::NewJob&& j) {
  NewJob job;
  job.payload = std::move(*j.mutable_payload());
  job.headers.reserve(j.headers_size());
  for (auto& h : *j.mutable_headers()) {
    job.headers.push_back(Header{std::move(*h.mutable_key()), std::move(*h.mutable_value())});
  }
  job.idempotency_key = std::move(*j.mutable_idempotency_key());
  if (j.has_delay()) job.delay = grpc_util::FromDuration(j.delay());
  if (j.has_not_before()) job.not_before = grpc_util::FromTimestamp(j.not_before());
  job.priority = j.priority();
  job.tenant = std::move(*j.mutable_tenant());
  if (j.has_source()) {
    job.source = JobSource{j.source().topic(), j.source().partition(), j.source().offset()};
  }
  return job;
}

}  // namespace conduit::work_queue::api
