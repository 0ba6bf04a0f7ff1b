#include "client/producer.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "common/hash/murmur2.h"

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

size_t SizeOf(const ProducerRecord& r) {
  size_t n = r.key.value_or("").size() + r.value.value_or("").size() + r.event_id.size();
  for (const auto& [k, v] : r.headers) n += k.size() + v.size();
  return n;
}

}  // namespace

// Per attempt: the call's context and response live as long as the call.
struct Call {
  grpc::ClientContext ctx;
  lpb::ProduceResponse response;
};

absl::StatusOr<std::unique_ptr<Producer>> Producer::Create(ProducerOptions options) {
  if (options.max_batch_records < 1 || options.max_batch_bytes < 1) {
    return absl::InvalidArgumentError("max_batch_records and max_batch_bytes must be positive");
  }
  auto stub = lpb::LogService::NewStub(
      grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials()));
  int32_t partitions = 0;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.request_timeout));
    lpb::DescribeTopicRequest req;
    req.set_name(options.topic);
    lpb::DescribeTopicResponse resp;
    grpc::Status s = stub->DescribeTopic(&ctx, req, &resp);
    if (!s.ok()) return grpc_util::FromGrpcStatus(s);
    partitions = resp.partitions_size();
  }
  int64_t producer_id = 0;
  int32_t epoch = 0;
  if (options.idempotent) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.request_timeout));
    lpb::InitProducerRequest req;
    req.set_producer_name(options.producer_name);
    lpb::InitProducerResponse resp;
    grpc::Status s = stub->InitProducer(&ctx, req, &resp);
    if (!s.ok()) return grpc_util::FromGrpcStatus(s);
    producer_id = resp.producer_id();
    epoch = resp.producer_epoch();
  }
  std::unique_ptr<Producer> p(new Producer(std::move(options), partitions, producer_id, epoch));
  p->stub_ = std::move(stub);
  p->sender_ = std::thread([raw = p.get()] { raw->Loop(); });
  return p;
}

Producer::Producer(ProducerOptions options, int32_t partitions, int64_t producer_id,
                   int32_t epoch)
    : options_(std::move(options)),
      partitions_(partitions),
      producer_id_(producer_id),
      producer_epoch_(epoch) {}

Producer::~Producer() {
  (void)Flush();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (sender_.joinable()) sender_.join();
}

void Producer::Send(ProducerRecord record, Callback done) {
  int32_t partition;
  if (record.partition) {
    partition = *record.partition;
    if (partition < 0 || partition >= partitions_) {
      absl::Status bad = absl::InvalidArgumentError(absl::StrCat(
          "topic '", options_.topic, "' has ", partitions_, " partitions; there is no ", partition));
      {
        absl::MutexLock lock(&mu_);
        if (first_error_.ok()) first_error_ = bad;  // Flush reports it too
      }
      done(bad);
      return;
    }
  } else if (record.key) {
    partition = hash::PartitionForKey(*record.key, partitions_);
  } else {
    absl::MutexLock lock(&mu_);
    partition = sticky_partition_;
  }
  record.partition = partition;
  absl::ReleasableMutexLock lock(&mu_);
  if (!fatal_.ok()) {
    const absl::Status fatal = fatal_;
    lock.Release();
    done(fatal);
    return;
  }
  PartitionQueue& q = queues_[partition];
  if (q.queued.empty()) q.first_queued = absl::Now();
  q.bytes += SizeOf(record);
  q.queued.push_back(Pending{std::move(record), std::move(done)});
  ++outstanding_;
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
  mu_.Await(absl::Condition(
      +[](int64_t* n) { return *n == 0; }, &outstanding_));
  flushing_ = false;
  return std::exchange(first_error_, absl::OkStatus());
}

void Producer::StartBatchLocked(int32_t partition) {
  PartitionQueue& q = queues_[partition];
  auto batch = std::make_unique<Batch>();
  lpb::ProduceRequest& req = batch->request;
  req.set_topic(options_.topic);
  size_t bytes = 0;
  while (!q.queued.empty() && static_cast<int>(batch->records.size()) < options_.max_batch_records &&
         (batch->records.empty() || bytes < options_.max_batch_bytes)) {
    Pending& p = q.queued.front();
    const size_t size = SizeOf(p.record);
    bytes += size;
    q.bytes -= size;
    lpb::ProduceRecord* r = req.add_records();
    r->set_partition(partition);
    if (p.record.key) r->set_key(*p.record.key);
    if (p.record.value) r->set_value(*p.record.value);
    for (const auto& [k, v] : p.record.headers) {
      lpb::Header* h = r->add_headers();
      h->set_key(k);
      h->set_value(v);
    }
    if (p.record.event_time) grpc_util::SetTimestamp(*p.record.event_time, r->mutable_event_time());
    r->set_event_id(p.record.event_id);
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
  q.in_flight = std::move(batch);
}

bool Producer::ReadyLocked(absl::Time now, std::vector<std::pair<int32_t, Batch*>>* send) {
  for (auto& [partition, q] : queues_) {
    if (q.in_flight) {
      Batch& b = *q.in_flight;
      if (b.retry_at != absl::InfinitePast() && b.retry_at <= now) {
        b.retry_at = absl::InfinitePast();
        send->emplace_back(partition, &b);
      }
      continue;
    }
    if (q.queued.empty()) continue;
    const bool full = static_cast<int>(q.queued.size()) >= options_.max_batch_records ||
                      q.bytes >= options_.max_batch_bytes;
    if (full || flushing_ || stopping_ || now - q.first_queued >= options_.linger) {
      StartBatchLocked(partition);
      send->emplace_back(partition, q.in_flight.get());
    }
  }
  return !send->empty();
}

void Producer::Loop() {
  const absl::Duration tick = std::max(absl::Microseconds(200), options_.linger / 4);
  while (true) {
    std::vector<std::pair<int32_t, Batch*>> send;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && outstanding_ == 0) return;
      ReadyLocked(absl::Now(), &send);
    }
    for (auto& [partition, batch] : send) SendAsync(partition, batch);
    if (send.empty()) absl::SleepFor(tick);
  }
}

void Producer::SendAsync(int32_t partition, Batch* batch) {
  ++batch->attempts;
  auto call = std::make_shared<Call>();
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  stub_->async()->Produce(&call->ctx, &batch->request, &call->response,
                          [this, partition, batch, call](grpc::Status status) {
                            OnResponse(partition, batch, status, call->response);
                          });
}

void Producer::OnResponse(int32_t partition, Batch* batch, const grpc::Status& status,
                          const lpb::ProduceResponse& response) {
  std::unique_ptr<Batch> done;
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    PartitionQueue& q = queues_[partition];
    if (!status.ok() && Retryable(status.error_code()) &&
        batch->attempts <= options_.max_retries) {
      // Same request, same sequences: the broker appends it once.
      batch->retry_at = absl::Now() + options_.retry_backoff * (1 << std::min(batch->attempts, 8));
      return;
    }
    done = std::move(q.in_flight);
    if (!status.ok()) {
      failure = grpc_util::FromGrpcStatus(status);
      if (RejectedBeforeWriting(status.error_code())) {
        // Provably not appended: the next batch takes its sequences.
        if (options_.idempotent) q.next_sequence = batch->request.sequences(0).base_sequence();
      } else if (options_.idempotent && fatal_.ok()) {
        // Maybe appended (a timeout after the broker wrote it), or the sequence is out of step:
        // reusing or skipping sequences could drop or reject later records, so this producer
        // stops; a new one gets a new epoch.
        fatal_ = absl::FailedPreconditionError(absl::StrCat(
            "idempotent producer stopped after an unclear failure (", failure.message(),
            "); create a new Producer"));
      }
      if (first_error_.ok()) first_error_ = failure;
    } else if (response.positions_size() != static_cast<int>(done->records.size())) {
      failure = absl::InternalError(absl::StrCat("broker returned ", response.positions_size(),
                                                 " positions for ", done->records.size(),
                                                 " records"));
      if (first_error_.ok()) first_error_ = failure;
    }
  }
  for (size_t i = 0; i < done->records.size(); ++i) {
    if (!failure.ok()) {
      done->records[i].done(failure);
    } else {
      const lpb::RecordPosition& p = response.positions(static_cast<int>(i));
      done->records[i].done(RecordPosition{p.partition(), p.offset(), p.duplicate()});
    }
  }
  absl::MutexLock lock(&mu_);
  outstanding_ -= static_cast<int64_t>(done->records.size());
}

}  // namespace conduit::client
