#include "client/worker.h"

#include <grpcpp/grpcpp.h>

#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"

namespace conduit::client {

namespace qpb = ::conduit::queue::v1;

Worker::Worker(WorkerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {
  stub_ = qpb::WorkQueue::NewStub(grpc_util::Dial(options_.address, options_.security));
}

Worker::~Worker() { Stop(); }

void Worker::Start() {
  for (int i = 0; i < std::max(1, options_.concurrency); ++i) {
    workers_.emplace_back([this] { WorkLoop(); });
  }
  keeper_ = std::thread([this] { KeeperLoop(); });
}

void Worker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Workers first: a Lease already waiting may still return a job, whose handler needs the
  // keeper until it finishes.
  for (auto& t : workers_) t.join();
  workers_.clear();
  {
    absl::MutexLock lock(&mu_);
    keeper_stopping_ = true;
  }
  if (keeper_.joinable()) keeper_.join();
}

Worker::Stats Worker::stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status Worker::error() {
  absl::MutexLock lock(&mu_);
  return error_;
}

void Worker::WorkLoop() {
  std::vector<PendingAck> acks;
  absl::Time oldest_ack;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // A lease's jobs are parsed onto an arena, freed at once after they are handled.
    google::protobuf::Arena arena;
    qpb::LeaseResponse& resp = *google::protobuf::Arena::CreateMessage<qpb::LeaseResponse>(&arena);
    grpc::Status s = LeaseOnce(&resp);
    if (!s.ok()) {
      const grpc::StatusCode code = s.error_code();
      if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED &&
          code != grpc::StatusCode::RESOURCE_EXHAUSTED) {
        // A wrong queue or option will not get better by retrying: this thread stops.
        absl::MutexLock lock(&mu_);
        error_ = grpc_util::FromGrpcStatus(s);
        return;
      }
      absl::SleepFor(absl::Milliseconds(100));  // the server is away: do not spin
      continue;
    }
    KeepAlive(resp);
    for (qpb::LeasedJob& leased : *resp.mutable_jobs()) Handle(leased, &acks, &oldest_ack);
    FlushAcks(acks);
  }
}

grpc::Status Worker::LeaseOnce(qpb::LeaseResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.lease_wait + options_.request_timeout));
  qpb::LeaseRequest req;
  req.set_queue(options_.queue);
  req.set_worker_id(options_.worker_id);
  req.set_max_jobs(std::max(1, options_.max_jobs_per_lease));
  if (options_.visibility_timeout > absl::ZeroDuration()) {
    grpc_util::SetDuration(options_.visibility_timeout, req.mutable_visibility_timeout());
  }
  // Short long-polls so that Stop is noticed promptly.
  grpc_util::SetDuration(std::min(options_.lease_wait, absl::Milliseconds(500)),
                         req.mutable_max_wait());
  return stub_->Lease(&ctx, req, resp);
}

void Worker::KeepAlive(const qpb::LeaseResponse& resp) {
  // Every job of the batch is kept alive from now on, also those still waiting their turn.
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (const qpb::LeasedJob& leased : resp.jobs()) {
    // The granted length (the queue's default when none was asked), at least a second.
    const absl::Duration lease =
        std::max(absl::Seconds(1), grpc_util::FromTimestamp(leased.deadline()) - now);
    ++stats_.leased;
    running_[leased.lease_token()] = Running{leased.job_id(), lease, now + lease / 3};
  }
}

void Worker::Handle(qpb::LeasedJob& leased, std::vector<PendingAck>* acks, absl::Time* oldest_ack) {
  // The response is ours: move the payload and headers out.
  Job job{
      leased.job_id(), std::move(*leased.mutable_payload()), {}, leased.attempt(), leased.tenant()};
  for (auto& h : *leased.mutable_headers()) {
    job.headers.emplace_back(std::move(*h.mutable_key()), std::move(*h.mutable_value()));
  }
  const Outcome outcome = handler_(job);
  if (outcome.kind == Outcome::Kind::kAck) {  // with this delivery's own token
    if (acks->empty()) *oldest_ack = absl::Now();
    acks->push_back({leased.job_id(), leased.lease_token()});
    if (absl::Now() - *oldest_ack >= options_.ack_linger) FlushAcks(*acks);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    running_.erase(leased.lease_token());
  }
  Nack(leased, outcome);
}

void Worker::KeeperLoop() {
  absl::MutexLock lock(&mu_);
  // Runs until Stop has joined the workers (so no handler is left running).
  auto done = +[](Worker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->keeper_stopping_; };
  while (!mu_.AwaitWithTimeout(absl::Condition(done, this), absl::Milliseconds(50))) {
    const absl::Time now = absl::Now();
    std::vector<std::pair<std::string, Running>> due;
    for (const auto& [token, r] : running_) {
      if (r.next_extension <= now) due.emplace_back(token, r);
    }
    if (due.empty()) continue;
    mu_.Unlock();
    for (const auto& [token, r] : due) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
      qpb::ExtendLeaseRequest req;
      req.set_queue(options_.queue);
      req.set_job_id(r.job_id);
      req.set_lease_token(token);
      grpc_util::SetDuration(r.lease, req.mutable_extension());
      qpb::ExtendLeaseResponse resp;
      grpc::Status s = stub_->ExtendLease(&ctx, req, &resp);
      absl::MutexLock relock(&mu_);
      auto it = running_.find(token);
      if (it == running_.end()) continue;  // finished meanwhile
      if (s.ok()) {
        ++stats_.extensions;
        it->second.next_extension = absl::Now() + r.lease / 3;
      } else if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
                 s.error_code() == grpc::StatusCode::NOT_FOUND) {
        // The lease is gone (expired, or the job moved on): the outcome will be refused.
        ++stats_.lost_leases;
        it->second.next_extension = absl::InfiniteFuture();
      } else {
        it->second.next_extension = absl::Now() + absl::Milliseconds(200);  // retry soon
      }
    }
    mu_.Lock();
  }
}

void Worker::FlushAcks(std::vector<PendingAck>& acks) {
  if (acks.empty()) return;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  int64_t acked = 0;
  if (acks.size() == 1) {
    qpb::AckRequest req;
    req.set_queue(options_.queue);
    req.set_job_id(acks[0].job_id);
    req.set_lease_token(acks[0].token);
    qpb::AckResponse resp;
    acked = stub_->Ack(&ctx, req, &resp).ok() ? 1 : 0;
  } else {
    qpb::AckBatchRequest req;
    req.set_queue(options_.queue);
    for (const PendingAck& a : acks) {
      auto* e = req.add_jobs();
      e->set_job_id(a.job_id);
      e->set_lease_token(a.token);
    }
    qpb::AckBatchResponse resp;
    if (stub_->AckBatch(&ctx, req, &resp).ok()) {
      for (const auto& r : resp.results()) acked += r.code() == 0 ? 1 : 0;
    }
  }
  // A failed ack leaves the job to be redelivered once its lease expires: at least once.
  absl::MutexLock lock(&mu_);
  stats_.acked += acked;
  for (const PendingAck& a : acks) running_.erase(a.token);
  acks.clear();
}

void Worker::Nack(const qpb::LeasedJob& job, const Outcome& outcome) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  qpb::NackRequest req;
  req.set_queue(options_.queue);
  req.set_job_id(job.job_id());
  req.set_lease_token(job.lease_token());
  req.set_reason(outcome.reason);
  req.set_failure_class(outcome.kind == Outcome::Kind::kDeadLetter ? qpb::FAILURE_CLASS_PERMANENT
                                                                   : qpb::FAILURE_CLASS_TRANSIENT);
  if (outcome.retry_after) grpc_util::SetDuration(*outcome.retry_after, req.mutable_retry_after());
  qpb::NackResponse resp;
  grpc::Status s = stub_->Nack(&ctx, req, &resp);
  absl::MutexLock lock(&mu_);
  if (!s.ok()) return;
  if (resp.dead()) {
    ++stats_.dead;
  } else {
    ++stats_.retried;
  }
}

}  // namespace conduit::client
