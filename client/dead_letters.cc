#include "client/dead_letters.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "client/group_consumer.h"
#include "common/backoff/backoff.h"
#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"

namespace conduit::client {
namespace {

namespace qpb = ::conduit::queue::v1;

constexpr char kPermanentPayload[] = "conduit.dev/permanent";

void AddHeader(qpb::NewJob* job, const std::string& key, const std::string& value) {
  auto* h = job->add_headers();
  h->set_key(key);
  h->set_value(value);
}

}  // namespace

absl::Status PermanentError(absl::string_view message) {
  absl::Status s = absl::FailedPreconditionError(message);
  s.SetPayload(kPermanentPayload, absl::Cord("1"));
  return s;
}

bool IsPermanent(const absl::Status& status) {
  return status.GetPayload(kPermanentPayload).has_value();
}

absl::Duration RetryBackoff(const RetryPolicy& policy, int failed, absl::BitGenRef rng) {
  return backoff::Policy{policy.backoff_initial, policy.backoff_multiplier, policy.backoff_max}
      .Jittered(failed, rng);
}

qpb::NewDeadLetter DeadLetterFor(const ConsumedRecord& record, const std::string& group,
                                 const std::string& worker, const DeadLetterTarget& target,
                                 const std::vector<FailedAttempt>& attempts) {
  qpb::NewDeadLetter letter;
  qpb::NewJob* job = letter.mutable_job();
  job->set_payload(record.value.value_or(""));
  std::string schema_version;
  for (const auto& [k, v] : record.headers) {
    AddHeader(job, k, v);
    if (k == target.schema_version_header) schema_version = v;
  }
  AddHeader(job, "conduit-source-topic", record.topic);
  AddHeader(job, "conduit-source-partition", absl::StrCat(record.partition));
  AddHeader(job, "conduit-source-offset", absl::StrCat(record.offset));
  if (record.key) AddHeader(job, "conduit-source-key", *record.key);
  if (!record.event_id.empty()) AddHeader(job, "conduit-event-id", record.event_id);
  AddHeader(job, "conduit-consumer-group", group);
  if (!target.consumer_version.empty()) {
    AddHeader(job, "conduit-consumer-version", target.consumer_version);
  }
  if (!schema_version.empty()) AddHeader(job, "conduit-schema-version", schema_version);
  job->set_idempotency_key(
      absl::StrCat("dlq/", group, "/", record.topic, "/", record.partition, "/", record.offset));
  job->mutable_source()->set_topic(record.topic);
  job->mutable_source()->set_partition(record.partition);
  job->mutable_source()->set_offset(record.offset);
  for (size_t i = 0; i < attempts.size(); ++i) {
    const FailedAttempt& a = attempts[i];
    qpb::Attempt* p = letter.add_attempts();
    p->set_attempt(static_cast<uint32_t>(i + 1));
    p->set_worker_id(worker);
    grpc_util::SetTimestamp(a.started, p->mutable_leased_at());
    grpc_util::SetTimestamp(a.ended, p->mutable_ended_at());
    p->set_outcome(qpb::OUTCOME_NACKED);
    p->set_reason(a.error.ToString());
    p->set_failure_class(IsPermanent(a.error) ? qpb::FAILURE_CLASS_PERMANENT
                                              : qpb::FAILURE_CLASS_TRANSIENT);
  }
  letter.set_reason(attempts.empty() ? "no attempt" : attempts.back().error.ToString());
  return letter;
}

DeadLetterHandler::DeadLetterHandler(RetryPolicy policy, DeadLetterTarget target, std::string group,
                                     std::string worker)
    : policy_(std::move(policy)),
      target_(std::move(target)),
      group_(std::move(group)),
      worker_(std::move(worker)),
      stub_(qpb::WorkQueue::NewStub(grpc_util::Dial(target_.queue_address, target_.security))) {}

absl::Status DeadLetterHandler::Handle(const ConsumedRecord& record, const Handler& handle) {
  std::vector<FailedAttempt> attempts;
  while (true) {
    const absl::Time started = absl::Now();
    absl::Status s = handle(record);
    if (s.ok()) return s;
    attempts.push_back(FailedAttempt{started, absl::Now(), s});
    if (IsPermanent(s) || static_cast<int>(attempts.size()) >= policy_.max_attempts) break;
    absl::SleepFor(RetryBackoff(policy_, static_cast<int>(attempts.size()), rng_));
  }
  return Send(record, attempts);
}

absl::Status DeadLetterHandler::Send(const ConsumedRecord& record,
                                     const std::vector<FailedAttempt>& attempts) {
  qpb::AddDeadLettersRequest request;
  request.set_queue(target_.queue);
  *request.add_dead_letters() = DeadLetterFor(record, group_, worker_, target_, attempts);
  qpb::AddDeadLettersResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + target_.request_timeout));
  const grpc::Status s = stub_->AddDeadLetters(&ctx, request, &response);
  if (!s.ok()) {
    return absl::Status(
        grpc_util::FromGrpcStatus(s).code(),
        absl::StrCat("dead-lettering ", record.topic, "/", record.partition, "@", record.offset,
                     " into ", target_.queue, ": ", s.error_message()));
  }
  ++dead_lettered_;
  return absl::OkStatus();
}

}  // namespace conduit::client
