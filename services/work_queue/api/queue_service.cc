#include "services/work_queue/api/queue_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "services/work_queue/api/queue_convert.h"
#include "services/work_queue/api/reactors.h"

namespace conduit::work_queue::api {
namespace {

// "N jobs (1, 2, 3, ...)" for the audit trail: at most the first 20 ids.
std::string IdsText(const std::vector<uint64_t>& ids) {
  constexpr size_t kShown = 20;
  std::string text = absl::StrCat(ids.size(), ids.size() == 1 ? " job" : " jobs");
  if (ids.empty()) return text;
  const std::vector<uint64_t> shown(ids.begin(), ids.begin() + std::min(ids.size(), kShown));
  absl::StrAppend(&text, " (", absl::StrJoin(shown, ", "), ids.size() > kShown ? ", ..." : "", ")");
  return text;
}

}  // namespace

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;
using grpc_util::ToGrpcStatus;

grpc::ServerUnaryReactor* QueueService::CreateQueue(grpc::CallbackServerContext* ctx,
                                                    const pb::CreateQueueRequest* request,
                                                    pb::CreateQueueResponse* response) {
  if (auto s = Allow(ctx, request->name(), security::Operation::kCreate); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->DeleteQueue(request->name(), Finisher<bool>(reactor, [](bool) {}));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::ListQueues(grpc::CallbackServerContext* ctx,
                                                   const pb::ListQueuesRequest*,
                                                   pb::ListQueuesResponse* response) {
  auto principal = guard_.PrincipalOf(*ctx);
  if (!principal.ok()) return FinishNow(ctx, principal.status());
  for (const QueueMeta& m : queue_->ListQueues()) {
    if (guard_
            .Check(*principal, security::ResourceType::kQueue, m.name,
                   security::Operation::kDescribe)
            .ok()) {
      ToProto(m, response->add_queues());
    }
  }
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* QueueService::GetQueueStats(grpc::CallbackServerContext* ctx,
                                                      const pb::GetQueueStatsRequest* request,
                                                      pb::GetQueueStatsResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDescribe); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
  return FinishNow(ctx, stats.status());
}

grpc::ServerUnaryReactor* QueueService::Enqueue(grpc::CallbackServerContext* ctx,
                                                const pb::EnqueueRequest* request,
                                                pb::EnqueueResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kWrite); !s.ok())
    return FinishNow(ctx, s);
  size_t bytes = 0;
  for (const auto& job : request->jobs()) bytes += job.payload().size();
  if (auto s = guard_.ChargeBytes(*ctx, security::QuotaKind::kProduceBytes, bytes); !s.ok()) {
    return FinishNow(ctx, s);
  }
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  // The jobs are not read again: their payloads move out.
  std::vector<NewJob> jobs;
  jobs.reserve(request->jobs_size());
  for (pb::NewJob& j : *grpc_util::MovableRequest(request).mutable_jobs()) {
    jobs.push_back(FromProto(std::move(j)));
  }
  auto* reactor = ctx->DefaultReactor();
  queue_->Enqueue(request->queue(), std::move(jobs), EnqueuedFinisher(reactor, response));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::Lease(grpc::CallbackServerContext* ctx,
                                              const pb::LeaseRequest* request,
                                              pb::LeaseResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  auto* reactor = ctx->DefaultReactor();
  queue_->Ack(request->queue(), request->job_id(), LeaseToken(request->lease_token()),
              Finisher<bool>(reactor, [](bool) {}));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::AckBatch(grpc::CallbackServerContext* ctx,
                                                 const pb::AckBatchRequest* request,
                                                 pb::AckBatchResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRead); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  auto args = NackArgsFromProto(*request);
  if (!args.ok()) return FinishNow(ctx, args.status());
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
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
  return FinishNow(ctx, page.status());
}

grpc::ServerUnaryReactor* QueueService::GetDeadLetter(grpc::CallbackServerContext* ctx,
                                                      const pb::GetDeadLetterRequest* request,
                                                      pb::GetDeadLetterResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kDescribe); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  auto job = queue_->GetDeadLetter(request->queue(), request->job_id());
  if (job.ok()) {
    ToProto(*job, response->mutable_dead_letter());
    if (!MayViewPayload(ctx, request->queue())) response->mutable_dead_letter()->clear_payload();
  }
  return FinishNow(ctx, job.status());
}

grpc::ServerUnaryReactor* QueueService::RedriveDeadLetters(
    grpc::CallbackServerContext* ctx, const pb::RedriveDeadLettersRequest* request,
    pb::RedriveDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kRedrive); !s.ok())
    return FinishNow(ctx, s);
  // And Write where the letters go: the queue itself, the named topic, or (to their source
  // topics) every topic.
  const absl::Status target =
      !request->has_to_topic()
          ? Allow(ctx, request->queue(), security::Operation::kWrite)
          : guard_.Check(*ctx, security::ResourceType::kTopic,
                         request->to_topic().topic().empty() ? "*" : request->to_topic().topic(),
                         security::Operation::kWrite);
  if (!target.ok()) return FinishNow(ctx, target);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  const DeadLetterSelection selection = Selection(*request);
  std::optional<std::string> replacement;
  if (request->has_replacement_payload()) replacement = request->replacement_payload();
  auto* reactor = ctx->DefaultReactor();
  auto finish = Finisher<RedriveResult>(
      reactor, [this, ctx, response, dry = selection.dry_run](const auto& r) {
        for (uint64_t id : r.moved) response->add_job_ids(id);
        for (uint64_t id : r.refused) response->add_refused_job_ids(id);
        response->set_dry_run(dry);
        guard_.AuditDetail(*ctx, absl::StrCat(dry ? "would redrive " : "redrove ", IdsText(r.moved),
                                              "; refused ", IdsText(r.refused)));
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
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  const DeadLetterSelection selection = Selection(*request);
  auto* reactor = ctx->DefaultReactor();
  queue_->Discard(
      request->queue(), selection, request->reason(),
      Finisher<std::vector<uint64_t>>(
          reactor, [this, ctx, request, response, dry = selection.dry_run](const auto& ids) {
            for (uint64_t id : ids) response->add_job_ids(id);
            response->set_dry_run(dry);
            guard_.AuditDetail(*ctx, absl::StrCat(dry ? "would discard " : "discarded ",
                                                  IdsText(ids), "; reason: ", request->reason()));
          }));
  return reactor;
}

grpc::ServerUnaryReactor* QueueService::AddDeadLetters(grpc::CallbackServerContext* ctx,
                                                       const pb::AddDeadLettersRequest* request,
                                                       pb::AddDeadLettersResponse* response) {
  if (auto s = Allow(ctx, request->queue(), security::Operation::kWrite); !s.ok())
    return FinishNow(ctx, s);
  if (auto s = grpc_util::CheckTimeFields(*request); !s.ok()) return FinishNow(ctx, s);
  // The dead letters' jobs are not read again: their payloads move out.
  std::vector<NewDeadLetter> letters;
  letters.reserve(request->dead_letters_size());
  for (pb::NewDeadLetter& d : *grpc_util::MovableRequest(request).mutable_dead_letters()) {
    NewDeadLetter letter{FromProto(std::move(*d.mutable_job())), d.reason(), {}};
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
