// Producer, how batches travel: started from the partition queues when full or lingered out,
// and sent in order (up to max_in_flight per partition). Their answers: producer_answers.cc.

#include <algorithm>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "client/producer.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;

namespace {

// Per attempt: the call's context and response live as long as the call. The response (a
// position per record) is parsed onto an arena, freed at once.
struct Call {
  ClusterRouter::Route route;  // where it went
  grpc::ClientContext ctx;
  google::protobuf::Arena arena;
  lpb::ProduceResponse& response =
      *google::protobuf::Arena::CreateMessage<lpb::ProduceResponse>(&arena);
};

}  // namespace

Producer::Batch::Batch()
    : request(*google::protobuf::Arena::CreateMessage<lpb::ProduceRequest>(&arena)) {}

Producer::BatchPtr Producer::StartBatchLocked(int32_t partition) {
  PartitionQueue& q = queues_[partition];
  auto batch = std::make_shared<Batch>();
  const size_t take = std::min(q.queued.size(), static_cast<size_t>(options_.max_batch_records));
  batch->records.reserve(take);
  size_t bytes = 0;
  while (!q.queued.empty() && batch->records.size() < take &&
         (batch->records.empty() || bytes < options_.max_batch_bytes)) {
    Pending& p = q.queued.front();
    bytes += p.size;
    q.bytes -= p.size;
    batch->records.push_back(std::move(p));
    q.queued.pop_front();
  }
  if (!q.queued.empty()) q.first_queued = absl::Now();
  lpb::ProduceRequest& req = batch->request;
  req.set_topic(options_.topic);
  req.set_acks(options_.acks);
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

void Producer::FillRequest(int32_t partition, Batch& batch) {
  // A batch has at least one record: a request that has them is a resend's, the same request.
  if (batch.request.records_size() > 0) return;
  auto* records = batch.request.mutable_records();
  records->Reserve(static_cast<int>(batch.records.size()));
  for (Pending& p : batch.records) {
    // The request owns the record's contents from here (a retry resends the request); the
    // batch keeps only what the callback needs.
    lpb::ProduceRecord* r = records->Add();
    r->set_partition(partition);
    if (p.record.key) r->set_key(std::move(*p.record.key));
    if (p.record.value) r->set_value(std::move(*p.record.value));
    for (auto& [k, v] : p.record.headers) {
      lpb::Header* h = r->add_headers();
      h->set_key(std::move(k));
      h->set_value(std::move(v));
    }
    if (p.record.event_time) grpc_util::SetTimestamp(*p.record.event_time, r->mutable_event_time());
    if (!p.record.event_id.empty()) r->set_event_id(std::move(p.record.event_id));
  }
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
      const bool lingers = now - q.first_queued < options_.linger;
      if (!FullLocked(q) && !flushing_ && !stopping_ && lingers) break;
      send->emplace_back(partition, StartBatchLocked(partition));
    }
  }
  for (size_t i = before; i < send->size(); ++i) ++(*send)[i].second->attempts;
  live_calls_ += static_cast<int64_t>(send->size() - before);
  return send->size() > before;
}

bool Producer::FullLocked(const PartitionQueue& q) const {
  return static_cast<int>(q.queued.size()) >= options_.max_batch_records ||
         q.bytes >= options_.max_batch_bytes;
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
  FillRequest(partition, *batch);
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

}  // namespace conduit::client
