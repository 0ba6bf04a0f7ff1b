// Producer, how batches travel: started from the partition queues, sent in order (up to
// max_in_flight per partition), resent when overtaken or refused for a while, settled, and
// completed in order.

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/producer.h"
#include "common/grpc/proto_time.h"
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

// Per attempt: the call's context and response live as long as the call.
struct Call {
  ClusterRouter::Route route;  // where it went
  grpc::ClientContext ctx;
  lpb::ProduceResponse response;
};

}  // namespace

Producer::BatchPtr Producer::StartBatchLocked(int32_t partition) {
  PartitionQueue& q = queues_[partition];
  auto batch = std::make_shared<Batch>();
  lpb::ProduceRequest& req = batch->request;
  req.set_topic(options_.topic);
  req.set_acks(options_.acks);
  size_t bytes = 0;
  while (!q.queued.empty() && static_cast<int>(batch->records.size()) < options_.max_batch_records &&
         (batch->records.empty() || bytes < options_.max_batch_bytes)) {
    Pending& p = q.queued.front();
    const size_t size = p.size;
    bytes += size;
    q.bytes -= size;
    // The request owns the record's contents from here (a retry resends the request); the
    // batch keeps only what the callback needs.
    lpb::ProduceRecord* r = req.add_records();
    r->set_partition(partition);
    if (p.record.key) r->set_key(std::move(*p.record.key));
    if (p.record.value) r->set_value(std::move(*p.record.value));
    for (auto& [k, v] : p.record.headers) {
      lpb::Header* h = r->add_headers();
      h->set_key(std::move(k));
      h->set_value(std::move(v));
    }
    if (p.record.event_time) grpc_util::SetTimestamp(*p.record.event_time, r->mutable_event_time());
    r->set_event_id(std::move(p.record.event_id));
    batch->records.push_back(std::move(p));
    q.queued.pop_front();
  }
  if (!q.queued.empty()) q.first_queued = absl::Now();
  if (options_.idempotent) {
    req.set_producer_id(producer_id_);
    req.set_producer_epoch(producer_epoch_);
    lpb::PartitionSequence* seq = req.add_sequences();
    seq->set_partition(partition);
    seq->set_base_sequence(q.next_sequence);
    q.next_sequence += static_cast<int32_t>(batch->records.size());
  }
  if (partition == sticky_partition_) sticky_partition_ = (sticky_partition_ + 1) % partitions_;
  q.in_flight.push_back(batch);
  return batch;
}

bool Producer::ReadyLocked(absl::Time now) {
  const size_t limit = InFlightLimit();
  std::deque<std::pair<int32_t, BatchPtr>>* send = &outbox_;
  const size_t before = send->size();
  for (auto& [partition, q] : queues_) {
    if (!fatal_.ok()) break;  // FailPendingLocked failed what was waiting; nothing new starts
    // Sequences restart after a refused batch only once every call behind it has returned: a
    // request still on its way could otherwise be appended under a reused sequence.
    if (AwaitsDoomedCalls(q)) continue;
    if (Resending(q)) {
      // Only the first unanswered batch goes again (the first in the deque: answered ones
      // leave from the front), and nothing new meanwhile: either would overtake it.
      Batch& lead = *q.in_flight.front();
      if (lead.retry_at != absl::InfinitePast() && lead.retry_at <= now) {
        lead.retry_at = absl::InfinitePast();
        send->emplace_back(partition, q.in_flight.front());
      }
      continue;
    }
    while (q.in_flight.size() < limit && !q.queued.empty()) {
      const bool full = static_cast<int>(q.queued.size()) >= options_.max_batch_records ||
                        q.bytes >= options_.max_batch_bytes;
      if (!full && !flushing_ && !stopping_ && now - q.first_queued < options_.linger) break;
      send->emplace_back(partition, StartBatchLocked(partition));
    }
  }
  for (size_t i = before; i < send->size(); ++i) ++(*send)[i].second->attempts;
  live_calls_ += static_cast<int64_t>(send->size() - before);
  return send->size() > before;
}

bool Producer::AwaitsDoomedCalls(const PartitionQueue& q) {
  return std::any_of(q.in_flight.begin(), q.in_flight.end(),
                     [](const BatchPtr& b) { return b->doomed && !b->answered; });
}

bool Producer::Resending(const PartitionQueue& q) {
  return std::any_of(q.in_flight.begin(), q.in_flight.end(),
                     [](const BatchPtr& b) { return b->retry_at != absl::InfinitePast(); });
}

size_t Producer::InFlightLimit() const {
  return options_.idempotent ? static_cast<size_t>(std::clamp(options_.max_in_flight, 1, 5)) : 1;
}

absl::Time Producer::NextDueLocked() const {
  absl::Time due = absl::InfiniteFuture();
  if (!fatal_.ok()) return due;
  const size_t limit = InFlightLimit();
  // As ReadyLocked decides: what waits for an answer (a doomed partition, one at its limit,
  // a resend behind an unanswered batch) is started by that answer, not by the clock.
  for (const auto& [partition, q] : queues_) {
    if (AwaitsDoomedCalls(q)) continue;
    if (Resending(q)) {
      const absl::Time at = q.in_flight.front()->retry_at;
      if (at != absl::InfinitePast()) due = std::min(due, at);
      continue;
    }
    if (q.in_flight.size() < limit && !q.queued.empty()) {
      due = std::min(due, q.first_queued + options_.linger);
    }
  }
  return due;
}

void Producer::WakeSenderLocked(absl::Time due) {
  if (due < sender_sleeps_until_) {
    sender_woken_ = true;
    sender_sleeps_until_ = absl::InfinitePast();  // woken: later calls need not signal again
    sender_cv_.Signal();
  }
}

bool Producer::PumpLocked(absl::Time now) {
  const bool ready = ReadyLocked(now);
  WakeSenderLocked(refresh_wanted_ ? absl::InfinitePast() : NextDueLocked());
  return ready;
}

void Producer::Loop() {
  mu_.Lock();
  while (!(stopping_ && outstanding_ == 0)) {
    if (std::exchange(refresh_wanted_, false)) {
      // Here, not on a gRPC callback thread: Refresh blocks. A batch it concerns waits out its
      // backoff meanwhile, so it goes to the leader the refresh found.
      mu_.Unlock();
      (void)router_->Refresh();  // a failed refresh shows in the next attempt
      mu_.Lock();
    }
    if (ReadyLocked(absl::Now())) {
      mu_.Unlock();
      SendOutbox();
      mu_.Lock();
      continue;
    }
    sender_sleeps_until_ = NextDueLocked();
    sender_woken_ = false;
    bool timed_out = false;
    while (!timed_out && !sender_woken_ && !refresh_wanted_ && !(stopping_ && outstanding_ == 0)) {
      timed_out = sender_cv_.WaitWithDeadline(&mu_, sender_sleeps_until_);
    }
    sender_sleeps_until_ = absl::InfinitePast();  // awake: nobody need wake it
  }
  mu_.Unlock();
}

void Producer::SendOutbox() {
  // One thread at a time, first in first out: the calls of a partition start in sequence order,
  // so the broker seldom sees a batch overtake another (which costs a resend).
  absl::MutexLock lock(&mu_);
  if (sending_) return;
  sending_ = true;
  while (!outbox_.empty()) {
    auto [partition, batch] = std::move(outbox_.front());
    outbox_.pop_front();
    mu_.Unlock();
    SendAsync(partition, std::move(batch));
    mu_.Lock();
  }
  sending_ = false;
}

void Producer::SendAsync(int32_t partition, BatchPtr batch) {
  absl::StatusOr<ClusterRouter::Route> route = router_->Leader(options_.topic, partition);
  if (!route.ok()) {  // offline, or its leader's address unknown: as a failed call
    OnResponse(partition, batch, grpc_util::ToGrpcStatus(route.status()), lpb::ProduceResponse(),
               nullptr, nullptr);
    EndCall();
    return;
  }
  auto call = std::make_shared<Call>();
  Call* c = call.get();
  c->route = *route;
  c->ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  Batch* raw = batch.get();
  // The context holds a reference to the channel. It goes as the call ends, before this
  // Producer may be destroyed, not later with the callback on gRPC's thread: were that the
  // channel's last reference, gRPC 1.51 would shut its callback threads down from one of them
  // and abort the process (tests/integration/client_shutdown_test.cc).
  auto on_done = [this, partition, batch = std::move(batch),
                  call = std::move(call)](grpc::Status status) mutable {
    OnResponse(partition, batch, status, call->response, &call->route, &call->ctx);
    call.reset();
    EndCall();
  };
  route->stub->async()->Produce(&c->ctx, &raw->request, &c->response, std::move(on_done));
}

void Producer::EndCall() {
  absl::MutexLock lock(&mu_);
  --live_calls_;  // the last touch of this object by the call
}

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
    for (const BatchPtr& b : ready) {
      for (size_t i = 0; i < b->records.size(); ++i) {
        if (b->result.ok()) {
          b->records[i].done(b->positions[i]);
        } else {
          b->records[i].done(b->result);
        }
      }
      records += static_cast<int64_t>(b->records.size());
    }
    mu_.Lock();
    outstanding_ -= records;
  }
  completing_ = false;
  if (stopping_ && outstanding_ == 0) WakeSenderLocked(absl::InfinitePast());
  mu_.Unlock();
}

}  // namespace conduit::client
