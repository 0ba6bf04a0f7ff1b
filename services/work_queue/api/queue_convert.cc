#include "services/work_queue/api/queue_convert.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"

namespace conduit::work_queue::api {

namespace pb = ::conduit::queue::v1;

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

QueueConfigPatch FromProto(const pb::QueueConfig& c) {
  QueueConfigPatch p;
  switch (c.durability()) {
    case pb::QUEUE_DURABILITY_UNSPECIFIED:
      break;
    case pb::QUEUE_DURABILITY_SYNC:
      p.durability = QueueDurability::kSync;
      break;
    case pb::QUEUE_DURABILITY_INTERVAL:
      p.durability = QueueDurability::kInterval;
      break;
    default:  // refused by ValidateConfig
      p.durability = static_cast<QueueDurability>(c.durability());
  }
  if (c.has_flush_interval()) p.flush_interval = FromDuration(c.flush_interval());
  if (c.has_visibility_timeout()) p.visibility_timeout = FromDuration(c.visibility_timeout());
  if (c.has_max_attempts()) p.max_attempts = c.max_attempts();
  if (c.has_max_lease_expiries()) p.max_lease_expiries = c.max_lease_expiries();
  if (c.has_backoff_initial()) p.backoff_initial = FromDuration(c.backoff_initial());
  if (c.has_backoff_multiplier()) p.backoff_multiplier = c.backoff_multiplier();
  if (c.has_backoff_max()) p.backoff_max = FromDuration(c.backoff_max());
  if (c.has_idempotency_window()) p.idempotency_window = FromDuration(c.idempotency_window());
  if (c.has_max_depth()) p.max_depth = c.max_depth();
  if (c.has_max_redrives()) p.max_redrives = c.max_redrives();
  if (c.has_max_ready_age()) p.max_ready_age = FromDuration(c.max_ready_age());
  if (!c.tenant_weights().empty()) {
    p.tenant_weights =
        std::map<std::string, int32_t>(c.tenant_weights().begin(), c.tenant_weights().end());
  }
  if (c.has_max_in_flight_per_tenant()) p.max_in_flight_per_tenant = c.max_in_flight_per_tenant();
  return p;
}

void ToProto(const QueueMeta& m, pb::QueueInfo* out) {
  const QueueConfig& c = m.config;
  out->set_name(m.name);
  auto* config = out->mutable_config();
  config->set_durability(c.durability == QueueDurability::kInterval ? pb::QUEUE_DURABILITY_INTERVAL
                                                                    : pb::QUEUE_DURABILITY_SYNC);
  SetDuration(c.flush_interval, config->mutable_flush_interval());
  SetDuration(c.visibility_timeout, config->mutable_visibility_timeout());
  config->set_max_attempts(c.max_attempts);
  config->set_max_lease_expiries(c.max_lease_expiries);
  SetDuration(c.backoff_initial, config->mutable_backoff_initial());
  config->set_backoff_multiplier(c.backoff_multiplier);
  SetDuration(c.backoff_max, config->mutable_backoff_max());
  SetDuration(c.idempotency_window, config->mutable_idempotency_window());
  config->set_max_depth(c.max_depth);
  config->set_max_redrives(c.max_redrives);
  SetDuration(c.max_ready_age, config->mutable_max_ready_age());
  for (const auto& [tenant, weight] : c.tenant_weights)
    (*config->mutable_tenant_weights())[tenant] = weight;
  config->set_max_in_flight_per_tenant(c.max_in_flight_per_tenant);
  SetTimestamp(m.created, out->mutable_created());
}

namespace {

pb::Outcome ToProto(Outcome o) {
  switch (o) {
    case Outcome::kLeased:
      return pb::OUTCOME_LEASED;
    case Outcome::kAcked:
      return pb::OUTCOME_ACKED;
    case Outcome::kNacked:
      return pb::OUTCOME_NACKED;
    case Outcome::kExpired:
      return pb::OUTCOME_EXPIRED;
  }
  return pb::OUTCOME_UNSPECIFIED;
}

template <typename Message>
void AddAttempts(const std::vector<Attempt>& attempts, size_t count, Message* out,
                 google::protobuf::RepeatedPtrField<pb::Attempt>* (Message::*field)()) {
  for (size_t i = 0; i < count; ++i) {
    const Attempt& a = attempts[i];
    pb::Attempt* p = (out->*field)()->Add();
    p->set_attempt(a.number);
    p->set_worker_id(a.worker);
    SetTimestamp(a.leased_at, p->mutable_leased_at());
    if (a.ended_at != absl::InfinitePast()) SetTimestamp(a.ended_at, p->mutable_ended_at());
    p->set_outcome(ToProto(a.outcome));
    p->set_reason(a.reason);
    p->set_failure_class(a.failure_class == FailureClass::kPermanent ? pb::FAILURE_CLASS_PERMANENT
                                                                     : pb::FAILURE_CLASS_TRANSIENT);
  }
}

template <typename Message>
void SetSource(const std::optional<JobSource>& source, Message* out) {
  if (!source) return;
  out->mutable_source()->set_topic(source->topic);
  out->mutable_source()->set_partition(source->partition);
  out->mutable_source()->set_offset(source->offset);
}

template <typename Message>
void AddHeaders(const std::vector<Header>& headers, Message* out) {
  for (const Header& h : headers) {
    auto* p = out->add_headers();
    p->set_key(h.key);
    p->set_value(h.value);
  }
}

}  // namespace

void ToProto(const Job& job, pb::DeadLetter* out) {
  out->set_job_id(job.id);
  out->set_payload(job.payload);
  AddHeaders(job.headers, out);
  out->set_tenant(job.tenant);
  out->set_idempotency_key(job.idempotency_key);
  out->set_priority(job.priority);
  SetTimestamp(job.enqueued_at, out->mutable_enqueued_at());
  SetTimestamp(job.died_at, out->mutable_died_at());
  out->set_reason(job.death_reason);
  AddAttempts(job.attempts, job.attempts.size(), out, &pb::DeadLetter::mutable_attempts);
  out->set_redrives(static_cast<uint32_t>(job.redrives));
  SetSource(job.source, out);
}

DeadLetterFilter FromProto(const pb::DeadLetterFilter& f) {
  DeadLetterFilter out;
  out.reason_contains = f.reason_contains();
  if (f.has_tenant()) out.tenant = f.tenant();
  if (f.has_died_after()) out.died_after = FromTimestamp(f.died_after());
  if (f.has_died_before()) out.died_before = FromTimestamp(f.died_before());
  return out;
}

void ToLeasedJob(const Job& job, pb::LeasedJob* p) {
  p->set_job_id(job.id);
  p->set_lease_token(job.lease_token.value());
  p->set_attempt(static_cast<uint32_t>(job.attempts.size()));
  SetTimestamp(job.lease_deadline, p->mutable_deadline());
  p->set_payload(job.payload);
  AddHeaders(job.headers, p);
  p->set_tenant(job.tenant);
  p->set_priority(job.priority);
  SetTimestamp(job.enqueued_at, p->mutable_enqueued_at());
  AddAttempts(job.attempts, job.attempts.size() - 1, p, &pb::LeasedJob::mutable_previous_attempts);
  SetSource(job.source, p);
}

absl::StatusOr<NackArgs> NackArgsFromProto(const pb::NackRequest& request) {
  NackArgs args;
  args.reason = request.reason();
  switch (request.failure_class()) {
    case pb::FAILURE_CLASS_UNSPECIFIED:
    case pb::FAILURE_CLASS_TRANSIENT:
      args.failure_class = FailureClass::kTransient;
      break;
    case pb::FAILURE_CLASS_PERMANENT:
      args.failure_class = FailureClass::kPermanent;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("failure_class ", request.failure_class(), " is not a FailureClass"));
  }
  if (request.has_retry_after()) args.retry_after = FromDuration(request.retry_after());
  return args;
}

}  // namespace conduit::work_queue::api
