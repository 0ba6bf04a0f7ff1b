#include "client/producer.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/status.h"
#include "common/hash/murmur2.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  if (options.max_batch_records < 1 || options.max_batch_bytes < 1) {
    return absl::InvalidArgumentError("max_batch_records and max_batch_bytes must be positive");
  }
  if (options.max_buffered_bytes < 1 || options.max_block < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "max_buffered_bytes must be positive and max_block not negative");
  }
  auto router =
      ClusterRouter::Create({.bootstrap = BootstrapList(options.address, options.bootstrap),
                             .request_timeout = options.request_timeout,
                             .retry_backoff = options.retry_backoff,
                             .security = options.security});
  if (!router.ok()) return router.status();
  absl::StatusOr<int32_t> partitions = (*router)->PartitionCount(options.topic);
  if (!partitions.ok()) return partitions.status();
  int64_t producer_id = 0;
  int32_t epoch = 0;
  if (options.idempotent) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.request_timeout));
    lpb::InitProducerRequest req;
    req.set_producer_name(options.producer_name);
    lpb::InitProducerResponse resp;
    grpc::Status s = (*router)->AnyBroker()->InitProducer(&ctx, req, &resp);
    if (!s.ok()) return grpc_util::FromGrpcStatus(s);
    producer_id = resp.producer_id();
    epoch = resp.producer_epoch();
  }
  std::unique_ptr<Producer> p(new Producer(std::move(options), *partitions, producer_id, epoch));
  p->router_ = *std::move(router);
  p->sender_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

Producer::Producer(ProducerOptions options, int32_t partitions, int64_t producer_id, int32_t epoch)
    : options_(std::move(options)),
      partitions_(partitions),
      producer_id_(producer_id),
      producer_epoch_(epoch) {}

Producer::~Producer() {
  (void)Flush();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    WakeSenderLocked(absl::InfinitePast());
  }
  if (sender_.joinable()) sender_.join();
  // Calls whose records already have results (failed with a refused batch) may still be
  // running, as may the thread that ran the last callbacks: neither may outlive this object.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Producer* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->live_calls_ == 0 && !p->completing_ && !p->sending_;
      },
      this));
}

void Producer::Send(ProducerRecord record, Callback done) {
  int32_t partition = 0;
  if (record.partition) {
    partition = *record.partition;
    if (partition < 0 || partition >= partitions_) {
      absl::Status bad =
          absl::InvalidArgumentError(absl::StrCat("topic '", options_.topic, "' has ", partitions_,
                                                  " partitions; there is no ", partition));
      {
        absl::MutexLock lock(&mu_);
        if (first_error_.ok()) first_error_ = bad;  // Flush reports it too
      }
      done(bad);
      return;
    }
  } else if (record.key) {
    partition = hash::PartitionForKey(*record.key, partitions_);
  }
  const size_t size = SizeOf(record);
  absl::ReleasableMutexLock lock(&mu_);
  if (!AwaitRoomLocked(size + kRecordOverhead)) {
    absl::Status full = absl::ResourceExhaustedError(absl::StrCat(
        "the producer's buffer of ", options_.max_buffered_bytes, " bytes stayed full for ",
        absl::FormatDuration(options_.max_block), " (records waiting for their results)"));
    if (first_error_.ok()) first_error_ = full;  // Flush reports it too
    lock.Release();
    done(full);
    return;
  }
  if (!fatal_.ok()) {
    const absl::Status fatal = fatal_;
    lock.Release();
    done(fatal);
    return;
  }
  if (!record.partition && !record.key) partition = sticky_partition_;
  record.partition = partition;
  PartitionQueue& q = queues_[partition];
  const absl::Time now = absl::Now();
  const bool first = q.queued.empty();
  if (first) q.first_queued = now;
  q.bytes += size;
  q.queued.push_back(Pending{std::move(record), std::move(done), size});
  ++outstanding_;
  buffered_bytes_ += size + kRecordOverhead;
  const bool due = FullLocked(q) || now - q.first_queued >= options_.linger;
  // The sender thread starts the batch: now when it is full (or there is no linger) and may
  // start, else when its linger is over; a partition at its in-flight limit starts its next
  // batch when an answer comes (OnResponse). Not this thread: a call that fails at once
  // completes records, and their callbacks do not run inside Send.
  const bool may_start =
      q.in_flight.size() < InFlightLimit() && !AwaitsDoomedCalls(q) && !Resending(q);
  if (due && may_start) {
    WakeSenderLocked(absl::InfinitePast());
  } else if (first) {
    WakeSenderLocked(now + options_.linger);
  }
}

std::future<absl::StatusOr<RecordPosition>> Producer::Send(ProducerRecord record) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<RecordPosition>>>();
  auto future = promise->get_future();
  Send(std::move(record),
       [promise](absl::StatusOr<RecordPosition> result) { promise->set_value(std::move(result)); });
  return future;
}

absl::Status Producer::Flush() {
  absl::MutexLock lock(&mu_);
  flushing_ = true;
  WakeSenderLocked(absl::InfinitePast());  // what lingers goes now
  mu_.Await(absl::Condition(
      +[](int64_t* n) { return *n == 0; }, &outstanding_));
  flushing_ = false;
  return std::exchange(first_error_, absl::OkStatus());
}

bool Producer::AwaitRoomLocked(size_t cost) {
  if (CompletingHere::current == this) return true;  // the room comes after this callback
  if (RoomLocked(cost)) return true;
  // Whatever fills the buffer is queued or in flight (a lingering batch goes when its linger
  // ends): the results that free the room come without help from here.
  struct Wanted {
    const Producer* p;
    size_t cost;
  } wanted{this, cost};
  auto room = +[](Wanted* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->p->mu_) {
    return w->p->RoomLocked(w->cost);
  };
  return mu_.AwaitWithTimeout(absl::Condition(room, &wanted), options_.max_block);
}

bool Producer::RoomLocked(size_t cost) const {
  return buffered_bytes_ == 0 || buffered_bytes_ + cost <= options_.max_buffered_bytes ||
         !fatal_.ok();
}

size_t Producer::SizeOf(const ProducerRecord& r) {
  size_t n = (r.key ? r.key->size() : 0) + (r.value ? r.value->size() : 0) + r.event_id.size();
  for (const auto& [k, v] : r.headers) n += k.size() + v.size();
  return n;
}

}  // namespace conduit::client
