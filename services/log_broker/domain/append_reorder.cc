// AppendPipeline's reorder wait: an idempotent request that reaches the writer ahead of an
// earlier batch of its producer and partition waits for it (PipelineOptions::reorder_wait).
//
// A pipelining producer (client::Producer keeps up to 5 batches of a partition in flight) sends
// its requests in order on one connection, but gRPC hands each call to whichever thread is
// free, so a later batch can be submitted first. Refusing it (ABORTED) costs the producer a
// round trip and stops its partition until the resend is answered; held here, it goes into the
// writer's batch right after the batch it waited for, often the same one. Everything about the
// sequences is still decided by CheckSequences, again, when its turn comes.

#include <algorithm>

#include "services/log_broker/domain/append_pipeline.h"

namespace conduit::log_broker {
namespace {

// A producer keeps at most 5 batches of a partition in flight, and the broker remembers the
// last 5 (kProducerBatchesRemembered): with one missing, at most 4 can be waiting for it.
constexpr size_t kMaxParkedPerProducer = 4;
constexpr int kMaxParkedRequests = 4096;

}  // namespace

bool AppendPipeline::Park(Pending& p, const absl::Status& gap) {
  if (options_.reorder_wait <= absl::ZeroDuration() || p.stamp->base_sequences.size() != 1) {
    return false;
  }
  // Monotonic: a step of the wall clock neither ends nor extends the wait.
  const absl::Duration now = clock_->Monotonic();
  const bool first = !p.reorder_deadline.has_value();
  if (first) p.reorder_deadline = now + options_.reorder_wait;
  if (now >= *p.reorder_deadline) return false;
  if (parked_requests_.load() >= kMaxParkedRequests ||
      parked_bytes_ + p.bytes > options_.max_queued_bytes / 4) {
    return false;
  }
  const int32_t partition = p.stamp->base_sequences.begin()->first;
  std::vector<Parked>& waiting =
      parked_[ProducerKey{&p.topic->partitions[partition], p.stamp->producer_id}];
  if (waiting.size() >= kMaxParkedPerProducer) return false;  // not empty: no key to erase
  if (first) observer_->OnProduceParked();
  parked_bytes_ += p.bytes;
  waiting.push_back(Parked{std::move(p), gap});
  ++parked_requests_;
  p.outcome.state = Outcome::kAnswered;  // moved out: nothing of it is left to complete
  return true;
}

void AppendPipeline::Unpark(const Pending& p, std::vector<Pending>& batch) {
  std::vector<Parked> ready;
  for (const auto& [partition, base] : p.stamp->base_sequences) {
    auto it = parked_.find(ProducerKey{&p.topic->partitions[partition], p.stamp->producer_id});
    if (it == parked_.end()) continue;
    for (Parked& w : it->second) ready.push_back(std::move(w));
    parked_.erase(it);
  }
  // `p` is an element of `batch`: nothing of it is read past this point.
  std::sort(ready.begin(), ready.end(), [](const Parked& a, const Parked& b) {
    const ProducerStamp& x = *a.pending.stamp;
    const ProducerStamp& y = *b.pending.stamp;
    return std::make_pair(x.epoch, x.base_sequences.begin()->second) <
           std::make_pair(y.epoch, y.base_sequences.begin()->second);
  });
  for (Parked& w : ready) {
    parked_bytes_ -= w.pending.bytes;
    --parked_requests_;
    batch.push_back(std::move(w.pending));
  }
}

void AppendPipeline::ExpireParked(absl::Duration now) {
  for (auto it = parked_.begin(); it != parked_.end();) {
    std::vector<Parked>& waiting = it->second;
    auto expired = std::stable_partition(waiting.begin(), waiting.end(), [now](const Parked& w) {
      return *w.pending.reorder_deadline > now;
    });
    for (auto w = expired; w != waiting.end(); ++w) {
      Pending& p = w->pending;
      parked_bytes_ -= p.bytes;
      --parked_requests_;
      p.Answer(p.topic->deleted.load() ? p.topic->DeletedError() : w->gap);
    }
    waiting.erase(expired, waiting.end());
    if (waiting.empty()) {
      parked_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace conduit::log_broker
