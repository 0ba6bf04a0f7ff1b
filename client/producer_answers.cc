// Producer, a batch's answer: settled (positions or an error), resent when overtaken or refused
// for a while, and completed in order, callbacks in Send order. Sending: producer_pipeline.cc.

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/producer.h"
#include "common/grpc/status.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;

namespace {

// Errors the broker returns before appending anything (validation, unknown topic).
bool RejectedBeforeWriting(grpc::StatusCode code) {
  return code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::NOT_FOUND;
}

bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED;
}

}  // namespace

void Producer::SettleLocked(PartitionQueue& q, Batch& batch, const grpc::Status& status,
                            const lpb::ProduceResponse& response) {
  batch.answered = true;
  if (status.ok()) {
    if (response.positions_size() != static_cast<int>(batch.records.size())) {
      batch.result = absl::InternalError(absl::StrCat("broker returned ", response.positions_size(),
                                                      " positions for ", batch.records.size(),
                                                      " records"));
      if (first_error_.ok()) first_error_ = batch.result;
      return;
    }
    batch.positions.reserve(batch.records.size());
    for (const lpb::RecordPosition& p : response.positions()) {
      batch.positions.push_back(RecordPosition{p.partition(), p.offset(), p.duplicate()});
    }
    return;
  }
  batch.result = grpc_util::FromGrpcStatus(status);
  if (first_error_.ok()) first_error_ = batch.result;
  if (!options_.idempotent) return;
  if (RejectedBeforeWriting(status.error_code())) {
    // Provably not appended, and neither will be the later batches of the partition already
    // started (their sequences now leave a gap): they fail with it, and the next batch takes
    // this one's sequences.
    // No new batch starts before the later ones' calls have returned (ReadyLocked).
    q.next_sequence = batch.request.sequences(0).base_sequence();
    bool later = false;
    for (const BatchPtr& b : q.in_flight) {
      if (b.get() == &batch) {
        later = true;
      } else if (later && !b->answered) {
        b->result = absl::AbortedError(absl::StrCat(
            "not appended: an earlier batch of partition ",
            batch.request.sequences(0).partition(), " was refused (", batch.result.message(), ")"));
        if (b->retry_at != absl::InfinitePast()) {  // returned already, waiting to be resent
          b->retry_at = absl::InfinitePast();
          b->answered = true;
        } else {
          b->doomed = true;
        }
      }
    }
  } else if (fatal_.ok()) {
    // Maybe appended (a timeout after the broker wrote it), or the sequence is out of step:
    // reusing or skipping sequences could drop or reject later records, so this producer
    // stops; a new one gets a new epoch.
    fatal_ = absl::FailedPreconditionError(absl::StrCat(
        "idempotent producer stopped after an unclear failure (", batch.result.message(),
        "); create a new Producer"));
    FailPendingLocked();
  }
}

void Producer::FailPendingLocked() {
  for (auto& [partition, q] : queues_) {
    for (const BatchPtr& b : q.in_flight) {
      if (!b->answered && b->retry_at != absl::InfinitePast()) {
        b->retry_at = absl::InfinitePast();
        b->answered = true;
        b->result = fatal_;
      }
    }
    if (q.queued.empty()) continue;
    // Queued records fail after the batches before them, as one answered batch at the back.
    auto rest = std::make_shared<Batch>();
    rest->answered = true;
    rest->result = fatal_;
    for (Pending& p : q.queued) rest->records.push_back(std::move(p));
    q.queued.clear();
    q.bytes = 0;
    q.in_flight.push_back(std::move(rest));
  }
}

void Producer::CollectAnsweredLocked() {
  for (auto& [partition, q] : queues_) {
    while (!q.in_flight.empty() && q.in_flight.front()->answered) {
      completions_.push_back(std::move(q.in_flight.front()));
      q.in_flight.pop_front();
    }
  }
}

Producer::RouteNews Producer::TakeRouteNews(int32_t partition, const grpc::Status& status,
                                            const ClusterRouter::Route* sent,
                                            const grpc::ClientContext* ctx) {
  RouteNews news;
  if (status.ok() || sent == nullptr || ctx == nullptr) return news;
  news.not_leader = NotLeaderHint(*ctx, status).has_value();
  news.moved = router_->OnNotLeader(options_.topic, partition, *sent, *ctx, status);
  return news;
}

bool Producer::ScheduleResendLocked(PartitionQueue& q, const BatchPtr& batch,
                                    const grpc::Status& status, RouteNews news) {
  const grpc::StatusCode code = status.error_code();
  if (!(Retryable(code) || news.not_leader) || batch->attempts > options_.max_retries ||
      !fatal_.ok()) {
    return false;
  }
  // Same request, same sequences: the broker appends it once. Behind an unanswered batch (it
  // overtook that one: ABORTED, a sequence gap; or that one was refused too) it goes again
  // right after it; to a leader that just moved, at once.
  const bool behind = q.in_flight.front() != batch;
  batch->retry_at = behind || news.moved ? absl::Now()
                                         : absl::Now() + options_.retry_backoff *
                                                             (1 << std::min(batch->attempts, 8));
  // Where the partition's leader is now is not known: ask before the backoff is over.
  if (!news.moved && (news.not_leader || code == grpc::StatusCode::UNAVAILABLE ||
                      code == grpc::StatusCode::DEADLINE_EXCEEDED)) {
    refresh_wanted_ = true;
  }
  return true;
}

void Producer::OnResponse(int32_t partition, const BatchPtr& batch, const grpc::Status& status,
                          const lpb::ProduceResponse& response, const ClusterRouter::Route* sent,
                          const grpc::ClientContext* ctx) {
  const RouteNews news = TakeRouteNews(partition, status, sent, ctx);
  {
    absl::MutexLock lock(&mu_);
    PartitionQueue& q = queues_[partition];
    if (batch->doomed && !status.ok()) {
      batch->answered = true;  // with the result SettleLocked gave it
    } else if (batch->doomed) {
      // Appended after all (it cannot be, with a gap before it): its records are in the log,
      // and which sequences are free is no longer known.
      batch->result = absl::OkStatus();
      SettleLocked(q, *batch, status, response);
      if (fatal_.ok()) {
        fatal_ = absl::InternalError("a batch behind a refused one was appended; create a new Producer");
        FailPendingLocked();
      }
    } else if (status.ok() || !ScheduleResendLocked(q, batch, status, news)) {
      SettleLocked(q, *batch, status, response);
    }
    CollectAnsweredLocked();
    // The partition's next batch goes out now, from this thread, and the server works on it
    // while this batch's callbacks run.
    PumpLocked(absl::Now());
  }
  SendOutbox();
  RunCompletions();
}

void Producer::RunCompletions() {
  // One thread at a time, so that callbacks keep the order of the records.
  mu_.Lock();
  if (completing_) {
    mu_.Unlock();
    return;
  }
  completing_ = true;
  while (!completions_.empty()) {
    std::deque<BatchPtr> ready;
    ready.swap(completions_);
    mu_.Unlock();
    int64_t records = 0;
    size_t bytes = 0;
    CompletingHere completing(this);  // a Send from a callback does not wait for room
    for (const BatchPtr& b : ready) {
      for (size_t i = 0; i < b->records.size(); ++i) {
        if (b->result.ok()) {
          b->records[i].done(b->positions[i]);
        } else {
          b->records[i].done(b->result);
        }
        bytes += b->records[i].size + kRecordOverhead;
      }
      records += static_cast<int64_t>(b->records.size());
    }
    mu_.Lock();
    outstanding_ -= records;
    buffered_bytes_ -= bytes;
  }
  completing_ = false;
  if (stopping_ && outstanding_ == 0) WakeSenderLocked(absl::InfinitePast());
  mu_.Unlock();
}

}  // namespace conduit::client
