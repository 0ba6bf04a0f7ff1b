#pragma once

// Conversions between the queue's protos and its domain types (QueueService).

#include "conduit/queue/v1/queue.pb.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::api {

QueueConfigPatch FromProto(const ::conduit::queue::v1::QueueConfig& c);
void ToProto(const QueueMeta& m, ::conduit::queue::v1::QueueInfo* out);
void ToProto(const Job& job, ::conduit::queue::v1::DeadLetter* out);
DeadLetterFilter FromProto(const ::conduit::queue::v1::DeadLetterFilter& f);

template <typename Request>
DeadLetterSelection Selection(const Request& r) {
  DeadLetterSelection s;
  s.ids.assign(r.job_ids().begin(), r.job_ids().end());
  s.filter = FromProto(r.filter());
  s.dry_run = r.has_dry_run() ? r.dry_run() : true;
  s.limit = r.limit();
  return s;
}

}  // namespace conduit::work_queue::api
