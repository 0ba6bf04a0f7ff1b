// WorkQueue.Consume: a worker's stream of credits, leased jobs, and acks, nacks and extensions.

#include <algorithm>
#include <deque>
#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "common/grpc/stepped_reactor.h"
#include "services/work_queue/api/queue_service.h"
#include "services/work_queue/api/reactors.h"

namespace conduit::work_queue::api {
namespace {

using grpc_util::FromDuration;
using grpc_util::SetTimestamp;

// Jobs asked per Lease (at most the credits left).
constexpr int32_t kMaxLeaseBatch = 100;
// Each Lease long-polls at most this long, so a cancelled or half-closed stream ends promptly;
// a job that becomes ready meanwhile is handed over at once (the queue wakes waiting leases).
constexpr absl::Duration kLeaseWait = absl::Seconds(1);
// Reading pauses while this many jobs and answers wait to be written or are in the write: a
// worker that sends acks but does not read is held back by HTTP/2 flow control.
constexpr size_t kMaxUnwritten = 1024;
// A response takes jobs and answers while under this size (it always takes one): everything
// ready when a write starts goes in it, so a worker taking one job at a time gets its jobs and
// answers in as few responses as the writes allow.
constexpr size_t kMaxResponseBytes = 1 << 20;
constexpr int32_t kMaxCredits = 10000;

}  // namespace

// The stream's state machine. Reactions (reads, writes, cancel) and the queue's callbacks
// (leases, settles) run on gRPC and queue threads; the state is under mu_, and every Start*,
// Finish and queue call is made outside it. Finish is called once, when no read, write or queue
// callback is outstanding, so none runs after OnDone deleted the reactor. Jobs a lease returns
// after the stream broke are not delivered: they come back when their leases expire. A message
// that does not parse as a ConsumeRequest fails the stream INVALID_ARGUMENT (ParsedBidiReactor).
class QueueService::ConsumeReactor final
    : public grpc_util::SteppedReactor<
          QueueService::ConsumeReactor,
          grpc_util::ParsedBidiReactor<pb::ConsumeRequest, pb::ConsumeResponse>> {
 public:
  ConsumeReactor(WorkQueue* queue, grpc::CallbackServerContext* ctx,
                 const grpc_util::CallGuard& guard)
      : queue_(queue), ctx_(ctx), guard_(guard) {
    StartRead(&request_);
  }

  // A message that does not parse fails the stream, as a message that names nothing to do.
  void OnUnparsable(absl::Status status) override {
    React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      EndReadsLocked();
      Fail(std::move(status));
    });
  }

  void OnRead(bool ok) override {
    if (!ok) return ReadsEnded();  // half-close, or the stream broke
    const int64_t request_id = request_.request_id();
    if (request_.has_start() || request_.credits() != 0) {
      absl::MutexLock lock(&mu_);
      if (request_.has_start()) Start(request_.start());
      if (request_.credits() != 0) Grant(request_.credits());
    }
    switch (request_.kind_case()) {
      case pb::ConsumeRequest::kStart:
        break;
      case pb::ConsumeRequest::kAck:
        Ack(request_id, request_.ack());
        break;
      case pb::ConsumeRequest::kNack:
        Nack(request_id, request_.nack());
        break;
      case pb::ConsumeRequest::kExtend:
        Extend(request_id, request_.extend());
        break;
      default:
        if (request_.credits() == 0) {
          FailAndRun(absl::InvalidArgumentError(
              "a Consume message needs credits, an ack, a nack or an extend"));
        }
    }
    React([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { reading_ = false; });
  }

 private:
  friend class grpc_util::SteppedReactor<ConsumeReactor, ParsedBidiReactor>;
  // What the state allows next, decided under mu_ and carried out after it is released.
  struct Steps {
    const pb::ConsumeResponse* write = nullptr;
    bool read = false;
    std::optional<LeaseArgs> lease;
    std::optional<grpc::Status> finish;
  };

  Steps NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Steps steps;
    const bool open = !broken_ && !failed_;
    if (open && !writing_ && !unwritten_.empty()) {
      writing_ = true;
      TakeUnwritten();
      steps.write = &response_;
    }
    if (open && !reading_ && !reads_done_ && unwritten_.size() + in_flight_ < kMaxUnwritten) {
      reading_ = true;
      steps.read = true;
    }
    if (open && !reads_done_ && started_ && credits_ >= RefillAt() && !leasing_) {
      leasing_ = true;
      ++outstanding_;
      LeaseArgs args = lease_;
      args.max_jobs = static_cast<int32_t>(std::min<int64_t>(credits_, kMaxLeaseBatch));
      steps.lease = std::move(args);
    }
    // A failed stream still writes nothing more; it ends once nothing is outstanding.
    if (!finished_ && !reading_ && !writing_ && outstanding_ == 0 &&
        (broken_ || failed_ || (reads_done_ && unwritten_.empty()))) {
      finished_ = true;
      steps.finish = failed_   ? grpc_util::ToGrpcStatus(failure_)
                     : broken_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream closed")
                               : grpc::Status::OK;
    }
    return steps;
  }

  void Run(Steps steps) {
    if (steps.write != nullptr) StartWrite(steps.write);
    if (steps.read) StartRead(&request_);
    if (steps.lease) {
      queue_->Lease(*steps.lease, [this](absl::StatusOr<std::vector<Job>> jobs) {
        React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { Leased(std::move(jobs)); });
      });
    }
    if (steps.finish) Finish(*steps.finish);
  }

  // Moves the unwritten jobs and answers, oldest first, into response_ (see kMaxResponseBytes).
  void TakeUnwritten() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response_.Clear();
    size_t bytes = 0;
    while (!unwritten_.empty() && bytes < kMaxResponseBytes) {
      Unwritten& next = unwritten_.front();
      if (auto* job = std::get_if<pb::LeasedJob>(&next)) {
        bytes += job->ByteSizeLong();
        *response_.add_jobs() = std::move(*job);
      } else {
        auto& settled = std::get<pb::SettleResult>(next);
        bytes += settled.ByteSizeLong();
        *response_.add_settled() = std::move(settled);
      }
      unwritten_.pop_front();
      ++in_flight_;
    }
  }

  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!failed_) failure_ = std::move(status);
    failed_ = true;
  }
  void FailAndRun(absl::Status status) {
    React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { Fail(std::move(status)); });
  }

  void Start(const pb::ConsumeStart& start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (started_) return Fail(absl::InvalidArgumentError("the stream has started already"));
    if (auto s = grpc_util::CheckTimeFields(start); !s.ok()) return Fail(s);
    if (start.queue().empty()) return Fail(absl::InvalidArgumentError("start needs a queue"));
    // Before any job is leased or sent.
    if (auto s = guard_.Check(*ctx_, security::ResourceType::kQueue, start.queue(),
                              security::Operation::kRead);
        !s.ok()) {
      return Fail(s);
    }
    started_ = true;
    lease_.queue = start.queue();
    lease_.worker = start.worker_id();
    if (start.has_visibility_timeout()) {
      lease_.visibility_timeout = FromDuration(start.visibility_timeout());
    }
    lease_.max_wait = kLeaseWait;
    if (start.credits() != 0) Grant(start.credits());
  }

  void Grant(int32_t credits) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!started_) return Fail(absl::InvalidArgumentError("the first message must be a start"));
    if (credits < 1 || credits > kMaxCredits) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("credits must be 1..", kMaxCredits, ", not ", credits)));
    }
    credits_ += credits;
    peak_credits_ = std::max(peak_credits_, credits_);
  }

  // The stream leases once this many credits are free: a quarter of the worker's window (at
  // least 1, at most one lease batch), so a worker that returns one credit per ack is topped up
  // in batches, with three quarters of its jobs still in hand, rather than one job per lease.
  // The window is the smaller of the most credits the stream has had and the credits plus the
  // jobs it holds: the first stays right when the worker settles with the unary calls (the
  // stream does not see those), the second when it shrinks its window; a worker holding
  // nothing is always topped up.
  int64_t RefillAt() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::clamp<int64_t>(std::min(peak_credits_, held_ + credits_) / 4, 1, kMaxLeaseBatch);
  }

  void Leased(absl::StatusOr<std::vector<Job>> jobs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    leasing_ = false;
    --outstanding_;
    if (!jobs.ok()) return Fail(jobs.status());
    if (broken_ || failed_) return;  // undelivered: back at their lease deadline
    for (const Job& job : *jobs) {
      ToLeasedJob(job, &unwritten_.emplace_back().emplace<pb::LeasedJob>());
      --credits_;
      ++held_;
    }
  }

  // Starts a settle (ack, nack, extend) of the stream's queue, if the stream has started; its
  // answer joins the outgoing messages. `call(queue, done)` calls the queue.
  // `releases`: an ack or nack, after which the worker no longer holds the job (whatever the
  // answer: a refused one was not its job to hold any more).
  template <typename T, typename Call, typename Fill>
  void Settle(int64_t request_id, uint64_t job_id, bool releases, Call call, Fill fill) {
    std::string queue;
    {
      absl::MutexLock lock(&mu_);
      if (started_) {
        queue = lease_.queue;
        ++outstanding_;
      }
    }
    if (queue.empty()) {
      FailAndRun(absl::InvalidArgumentError("the first message must be a start"));
      return;
    }
    call(queue, [this, request_id, job_id, releases, fill](absl::StatusOr<T> result) {
      React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        --outstanding_;
        if (releases && held_ > 0) --held_;
        if (!broken_ && !failed_) {
          pb::SettleResult* out = &unwritten_.emplace_back().emplace<pb::SettleResult>();
          out->set_request_id(request_id);
          out->set_job_id(job_id);
          out->set_code(static_cast<int32_t>(result.status().code()));
          out->set_message(std::string(result.status().message()));
          if (result.ok()) fill(*result, out);
        }
      });
    });
  }

  void Ack(int64_t request_id, const pb::AckRequest& ack) {
    const uint64_t job = ack.job_id();
    const LeaseToken token(ack.lease_token());
    Settle<bool>(
        request_id, job, /*releases=*/true,
        [&](const std::string& queue, Callback<bool> done) {
          queue_->Ack(queue, job, token, std::move(done));
        },
        [](bool, pb::SettleResult*) {});
  }

  void Nack(int64_t request_id, const pb::NackRequest& nack) {
    auto args = NackArgsFromProto(nack);
    if (!args.ok()) {
      FailAndRun(args.status());
      return;
    }
    const uint64_t job = nack.job_id();
    const LeaseToken token(nack.lease_token());
    Settle<NackResult>(
        request_id, job, /*releases=*/true,
        [&](const std::string& queue, Callback<NackResult> done) {
          queue_->Nack(queue, job, token, *args, std::move(done));
        },
        [](const NackResult& r, pb::SettleResult* out) {
          out->set_dead(r.dead);
          if (!r.dead) SetTimestamp(r.retry_at, out->mutable_retry_at());
        });
  }

  void Extend(int64_t request_id, const pb::ExtendLeaseRequest& extend) {
    if (auto s = grpc_util::CheckTimeFields(extend); !s.ok()) {
      FailAndRun(s);
      return;
    }
    const uint64_t job = extend.job_id();
    const LeaseToken token(extend.lease_token());
    const absl::Duration extension = FromDuration(extend.extension());
    Settle<absl::Time>(
        request_id, job, /*releases=*/false,
        [&](const std::string& queue, Callback<absl::Time> done) {
          queue_->ExtendLease(queue, job, token, extension, std::move(done));
        },
        [](absl::Time deadline, pb::SettleResult* out) {
          SetTimestamp(deadline, out->mutable_deadline());
        });
  }

  WorkQueue* const queue_;
  grpc::CallbackServerContext* const ctx_;
  const grpc_util::CallGuard& guard_;
  // Filled by a read; used by OnRead before the next read starts.
  pb::ConsumeRequest request_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  LeaseArgs lease_ ABSL_GUARDED_BY(mu_);  // queue, worker, visibility timeout, wait
  int64_t credits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_credits_ ABSL_GUARDED_BY(mu_) = 0;  // the most credits_ has been
  // Jobs pushed on this stream and not yet acked or nacked on it (RefillAt).
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  bool leasing_ ABSL_GUARDED_BY(mu_) = false;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // queue callbacks still to come
  // Jobs and settle answers to write, in the order they became ready.
  using Unwritten = std::variant<pb::LeasedJob, pb::SettleResult>;
  std::deque<Unwritten> unwritten_ ABSL_GUARDED_BY(mu_);
  // The response being written (while writing_); in_flight_ counts its jobs and answers.
  pb::ConsumeResponse response_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // bad input or a queue error: ends with failure_
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* QueueService::ParsedConsume(
    grpc::CallbackServerContext* ctx) {
  return new ConsumeReactor(queue_, ctx, guard_);
}

}  // namespace conduit::work_queue::api
