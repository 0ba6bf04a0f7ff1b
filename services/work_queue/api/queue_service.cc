#include "services/work_queue/api/queue_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "services/work_queue/api/reactors.h"

namespace conduit::work_queue::api {
namespace {

using grpc_util::ToGrpcStatus;

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

QueueConfigPatch FromProto(const pb::QueueConfig& c) {
  QueueConfigPatch p;
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

template <typename Request>
DeadLetterSelection Selection(const Request& r) {
  DeadLetterSelection s;
  s.ids.assign(r.job_ids().begin(), r.job_ids().end());
  s.filter = FromProto(r.filter());
  s.dry_run = r.has_dry_run() ? r.dry_run() : true;
  s.limit = r.limit();
  return s;
}

}  // namespace

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

grpc::ServerUnaryReactor* QueueService::CreateQueue(grpc::CallbackServerContext* ctx,
                                                    const pb::CreateQueueRequest* request,
                                                    pb::CreateQueueResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kCreate); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->CreateQueue(request->name(), FromProto(request->config()),
                      Finisher<QueueMeta>(reactor, [response](const QueueMeta& m) {
                        ToProto(m, response->mutable_queue());
                      }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::DeleteQueue(grpc::CallbackServerContext* ctx,
                                                    const pb::DeleteQueueRequest* request,
                                                    pb::DeleteQueueResponse*) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kDelete); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->DeleteQueue(request->name(), Finisher<bool>(reactor, [](bool) {}));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::ListQueues(grpc::CallbackServerContext* ctx,
                                                   const pb::ListQueuesRequest*,
                                                   pb::ListQueuesResponse* response) {
  auto principal = guard_.PrincipalOf(*ctx);
  if (!principal.ok()) return Done(ctx, principal.status());
  for (const QueueMeta& m : queue_->ListQueues()) {
    if (guard_
            .Check(*principal, security::ResourceType::kQueue, m.name,
                   security::Operation::kDescribe)
            .ok()) {
      ToProto(m, response->add_queues());
    }
  }
  return Done(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* QueueService::GetQueueStats(grpc::CallbackServerContext* ctx,
                                                      const pb::GetQueueStatsRequest* request,
                                                      pb::GetQueueStatsResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDescribe); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto stats = queue_->Stats(request->queue());
  if (stats.ok()) {
    response->set_ready(stats->ready);
    response->set_delayed(stats->delayed);
    response->set_leased(stats->leased);
    response->set_dead(stats->dead);
    SetDuration(stats->oldest_ready_age, response->mutable_oldest_ready_age());
    SetDuration(stats->oldest_dead_age, response->mutable_oldest_dead_age());
    response->set_enqueue_rate(stats->enqueue_rate);
    response->set_ack_rate(stats->ack_rate);
    response->set_nack_rate(stats->nack_rate);
    response->set_expiry_rate(stats->expiry_rate);
  }
  return Done(ctx, stats.status());
}

grpc::ServerUnaryReactor* QueueService::Enqueue(grpc::CallbackServerContext* ctx,
                                                const pb::EnqueueRequest* request,
                                                pb::EnqueueResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kWrite); !s.ok())
    return Done(ctx, s);
  size_t bytes = 0;
  for (const auto& job : request->jobs()) bytes += job.payload().size();
  if (auto s = guard_.ChargeBytes(*ctx, security::QuotaKind::kProduceBytes, bytes); !s.ok()) {
    return Done(ctx, s);
  }
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  std::vector<NewJob> jobs;
  for (const pb::NewJob& j : request->jobs()) jobs.push_back(FromProto(j));
  auto* reactor = ctx->DefaultReactor();
  queue_->Enqueue(request->queue(), std::move(jobs), EnqueuedFinisher(reactor, response));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::Lease(grpc::CallbackServerContext* ctx,
                                              const pb::LeaseRequest* request,
                                              pb::LeaseResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  LeaseArgs args;
  args.queue = request->queue();
  args.worker = request->worker_id();
  args.max_jobs = request->max_jobs() == 0 ? 1 : request->max_jobs();
  if (request->has_visibility_timeout()) {
    args.visibility_timeout = FromDuration(request->visibility_timeout());
  }
  args.max_wait = FromDuration(request->max_wait());
  auto* reactor = ctx->DefaultReactor();
  queue_->Lease(args, Finisher<std::vector<Job>>(reactor, [response](const auto& jobs) {
                  for (const Job& job : jobs) ToLeasedJob(job, response->add_jobs());
                }));

  return reactor;
}

grpc::ServerUnaryReactor* QueueService::ExtendLease(grpc::CallbackServerContext* ctx,
                                                    const pb::ExtendLeaseRequest* request,
                                                    pb::ExtendLeaseResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->ExtendLease(request->queue(), request->job_id(), LeaseToken(request->lease_token()),
                      FromDuration(request->extension()),
                      Finisher<absl::Time>(reactor, [response](absl::Time deadline) {
                        SetTimestamp(deadline, response->mutable_deadline());
                      }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::Ack(grpc::CallbackServerContext* ctx,
                                            const pb::AckRequest* request, pb::AckResponse*) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->Ack(request->queue(), request->job_id(), LeaseToken(request->lease_token()),
              Finisher<bool>(reactor, [](bool) {}));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::AckBatch(grpc::CallbackServerContext* ctx,
                                                 const pb::AckBatchRequest* request,
                                                 pb::AckBatchResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  std::vector<AckEntry> entries;
  entries.reserve(request->jobs_size());
  for (const auto& e : request->jobs())
    entries.push_back({e.job_id(), LeaseToken(e.lease_token())});
  auto* reactor = ctx->DefaultReactor();
  queue_->AckBatch(request->queue(), entries,
                   Finisher<std::vector<absl::Status>>(
                       reactor, [request, response](const std::vector<absl::Status>& results) {
                         for (size_t i = 0; i < results.size(); ++i) {
                           auto* r = response->add_results();
                           r->set_job_id(request->jobs(static_cast<int>(i)).job_id());
                           r->set_code(static_cast<int32_t>(results[i].code()));
                           r->set_message(std::string(results[i].message()));
                         }
                       }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::Nack(grpc::CallbackServerContext* ctx,
                                             const pb::NackRequest* request,
                                             pb::NackResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto args = NackArgsFromProto(*request);
  if (!args.ok()) return Done(ctx, args.status());
  auto* reactor = ctx->DefaultReactor();
  queue_->Nack(request->queue(), request->job_id(), LeaseToken(request->lease_token()), *args,
               Finisher<NackResult>(reactor, [response](const NackResult& r) {
                 response->set_dead(r.dead);
                 if (!r.dead) SetTimestamp(r.retry_at, response->mutable_retry_at());
               }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::ListDeadLetters(grpc::CallbackServerContext* ctx,
                                                        const pb::ListDeadLettersRequest* request,
                                                        pb::ListDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDescribe); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto page = queue_->ListDeadLetters(request->queue(), FromProto(request->filter()),
                                      request->page_size(), request->page_token());
  if (page.ok()) {
    const bool payloads = MayViewPayload(ctx, request->queue());
    for (const Job& job : page->jobs) {
      pb::DeadLetter* letter = response->add_dead_letters();
      ToProto(job, letter);
      if (!payloads) letter->clear_payload();
    }
    response->set_next_page_token(page->next_page_token);
  }
  return Done(ctx, page.status());
}

grpc::ServerUnaryReactor* QueueService::GetDeadLetter(grpc::CallbackServerContext* ctx,
                                                      const pb::GetDeadLetterRequest* request,
                                                      pb::GetDeadLetterResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDescribe); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  auto job = queue_->GetDeadLetter(request->queue(), request->job_id());
  if (job.ok()) {
    ToProto(*job, response->mutable_dead_letter());
    if (!MayViewPayload(ctx, request->queue())) response->mutable_dead_letter()->clear_payload();
  }
  return Done(ctx, job.status());
}

grpc::ServerUnaryReactor* QueueService::RedriveDeadLetters(
    grpc::CallbackServerContext* ctx, const pb::RedriveDeadLettersRequest* request,
    pb::RedriveDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRedrive); !s.ok())
    return Done(ctx, s);
  // And Write where the letters go: the queue itself, the named topic, or (to their source
  // topics) every topic.
  const absl::Status target =
      !request->has_to_topic()
          ? Allow(ctx, request->queue(), security::Operation::kWrite)
          : guard_.Check(*ctx, security::ResourceType::kTopic,
                         request->to_topic().topic().empty() ? "*" : request->to_topic().topic(),
                         security::Operation::kWrite);
  if (!target.ok()) return Done(ctx, target);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  const DeadLetterSelection selection = Selection(*request);
  std::optional<std::string> replacement;
  if (request->has_replacement_payload()) replacement = request->replacement_payload();
  auto* reactor = ctx->DefaultReactor();
  auto finish =
      Finisher<RedriveResult>(reactor, [response, dry = selection.dry_run](const auto& r) {
        for (uint64_t id : r.moved) response->add_job_ids(id);
        for (uint64_t id : r.refused) response->add_refused_job_ids(id);
        response->set_dry_run(dry);
      });
  if (request->has_to_topic()) {
    queue_->RedriveToTopic(request->queue(), selection, replacement, request->to_topic().topic(),
                           std::move(finish));
  } else {
    queue_->Redrive(request->queue(), selection, replacement, request->rate(), std::move(finish));
  }
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::DiscardDeadLetters(
    grpc::CallbackServerContext* ctx, const pb::DiscardDeadLettersRequest* request,
    pb::DiscardDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDelete); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  const DeadLetterSelection selection = Selection(*request);
  auto* reactor = ctx->DefaultReactor();
  queue_->Discard(request->queue(), selection, request->reason(),
                  Finisher<std::vector<uint64_t>>(
                      reactor, [response, dry = selection.dry_run](const auto& ids) {
                        for (uint64_t id : ids) response->add_job_ids(id);
                        response->set_dry_run(dry);
                      }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::AddDeadLetters(grpc::CallbackServerContext* ctx,
                                                       const pb::AddDeadLettersRequest* request,
                                                       pb::AddDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kWrite); !s.ok())
    return Done(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return Done(ctx, s);
  std::vector<NewDeadLetter> letters;
  for (const pb::NewDeadLetter& d : request->dead_letters()) {
    NewDeadLetter letter{FromProto(d.job()), d.reason(), {}};
    for (const pb::Attempt& a : d.attempts()) {
      letter.attempts.push_back(
          Attempt{a.attempt(), a.worker_id(), FromTimestamp(a.leased_at()),
                  a.has_ended_at() ? FromTimestamp(a.ended_at()) : absl::InfinitePast(),
                  Outcome::kNacked, a.reason(),
                  a.failure_class() == pb::FAILURE_CLASS_PERMANENT ? FailureClass::kPermanent
                                                                   : FailureClass::kTransient});
    }
    letters.push_back(std::move(letter));
  }
  auto* reactor = ctx->DefaultReactor();
  queue_->AddDeadLetters(request->queue(), std::move(letters), EnqueuedFinisher(reactor, response));
  return reactor;
}

}  // namespace conduit::work_queue::api
