// GroupConsumer: reading and committing (Poll, Commit, CommitAsync, ProcessAndCommit). Membership
// and assignment changes are in group_consumer.cc.
#include <grpcpp/grpcpp.h>

#include "client/group_consumer.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "common/status/status_macros.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;
namespace cpb = ::conduit::coordinator::v1;
using grpc_util::FromGrpcStatus;

absl::StatusOr<std::vector<ConsumedRecord>> GroupConsumer::Poll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<ConsumedRecord> out;
  while (true) {
    std::vector<std::pair<TopicPartition, int64_t>> owned;
    size_t first = 0;
    {
      absl::MutexLock lock(&mu_);
      owned.assign(positions_.begin(), positions_.end());
      if (!owned.empty()) first = next_partition_++ % owned.size();
    }
    absl::Duration token_wait;
    const int budget = FetchBudget(&token_wait);
    if (budget == 0) {  // rate-limited: wait for a token, or return nothing at the deadline
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return out;
      absl::SleepFor(std::min(left, token_wait));
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    for (size_t i = 0; i < owned.size() && out.empty(); ++i) {
      const auto& [tp, position] = owned[(first + i) % owned.size()];
      // Long-poll on the last partition tried, so an idle group does not spin.
      const absl::Duration wait =
          i + 1 == owned.size() ? std::min(left, absl::Milliseconds(200)) : absl::ZeroDuration();
      lpb::FetchResponse resp;
      grpc::Status s = FetchFromLeader(tp, position, wait, budget, &resp);
      int64_t next = position;
      if (s.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
        // Retention passed this position: skip to the log start (the records are gone).
        auto start = ListOffset(tp, lpb::OFFSET_SPEC_EARLIEST);
        next = std::max(position, start.ok() ? *start : resp.log_start_offset());
      } else if (!s.ok()) {
        return FromGrpcStatus(s);
      } else {
        next = resp.next_offset();
      }
      TakeFetched(tp, position, next, resp, &out);
    }
    if (!out.empty() || absl::Now() >= deadline) return out;
    if (owned.empty()) absl::SleepFor(std::min(deadline - absl::Now(), absl::Milliseconds(20)));
  }
}

int GroupConsumer::FetchBudget(absl::Duration* wait) {
  absl::MutexLock lock(&mu_);
  if (!limiter_) return options_.max_poll_records;
  const int64_t available = limiter_->Available();
  if (available == 0) *wait = limiter_->TimeUntilAvailable(1);
  return static_cast<int>(std::min<int64_t>(available, options_.max_poll_records));
}

grpc::Status GroupConsumer::FetchFromLeader(const TopicPartition& tp, int64_t position,
                                            absl::Duration wait, int max_records,
                                            lpb::FetchResponse* resp) {
  lpb::FetchRequest req;
  req.set_topic(tp.first);
  req.set_partition(tp.second);
  req.set_offset(position);
  req.set_max_records(max_records);
  if (wait > absl::ZeroDuration()) grpc_util::SetDuration(wait, req.mutable_max_wait());
  return router_->CallLeader(tp.first, tp.second,
                             [&](ClusterRouter::Stub& stub, grpc::ClientContext& ctx) {
                               resp->Clear();
                               return stub.Fetch(&ctx, req, resp);
                             });
}

void GroupConsumer::TakeFetched(const TopicPartition& tp, int64_t position, int64_t next,
                                lpb::FetchResponse& resp, std::vector<ConsumedRecord>* out) {
  absl::MutexLock lock(&mu_);
  auto it = positions_.find(tp);
  if (it == positions_.end() || it->second != position) return;  // revoked or reset
  it->second = next;
  // Concurrent Polls may each have fetched up to the budget: the bucket goes into debt.
  if (limiter_) limiter_->Take(resp.records_size());
  for (lpb::Record& r : *resp.mutable_records()) {  // the response is ours: move out
    ConsumedRecord c;
    c.topic = tp.first;
    c.partition = tp.second;
    c.offset = r.offset();
    if (r.has_key()) c.key = std::move(*r.mutable_key());
    if (r.has_value()) c.value = std::move(*r.mutable_value());
    for (lpb::Header& h : *r.mutable_headers()) {
      c.headers.emplace_back(std::move(*h.mutable_key()), std::move(*h.mutable_value()));
    }
    c.append_time = grpc_util::FromTimestamp(r.append_time());
    if (r.has_event_time()) c.event_time = grpc_util::FromTimestamp(r.event_time());
    c.event_id = std::move(*r.mutable_event_id());
    out->push_back(std::move(c));
  }
}

cpb::CommitOffsetsRequest GroupConsumer::CommitRequest(
    const std::map<TopicPartition, int64_t>& positions, const std::string& member_id,
    int32_t epoch) const {
  cpb::CommitOffsetsRequest req;
  req.set_group_id(options_.group);
  req.set_member_id(member_id);
  req.set_member_epoch(epoch);
  cpb::TopicCommits* current = nullptr;
  for (const auto& [tp, offset] : positions) {
    if (!current || current->topic() != tp.first) {
      current = req.add_topics();
      current->set_topic(tp.first);
    }
    cpb::PartitionCommit* p = current->add_partitions();
    p->set_partition(tp.second);
    p->set_offset(offset);
  }
  return req;
}

absl::Status GroupConsumer::CommitPositions(const std::map<TopicPartition, int64_t>& positions,
                                            const std::string& member_id, int32_t epoch) {
  if (member_id.empty()) return absl::FailedPreconditionError("not a member of the group now");
  if (positions.empty()) return absl::OkStatus();
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  cpb::CommitOffsetsResponse resp;
  return FromGrpcStatus(
      coordinator_->CommitOffsets(&ctx, CommitRequest(positions, member_id, epoch), &resp));
}

absl::Status GroupConsumer::Commit() {
  std::map<TopicPartition, int64_t> positions;
  std::string member_id;
  int32_t epoch;
  {
    // One look: positions and the epoch they belong to change together (a reset).
    absl::MutexLock lock(&mu_);
    positions = positions_;
    member_id = member_id_;
    epoch = epoch_;
  }
  return CommitPositions(positions, member_id, epoch);
}

absl::Status GroupConsumer::Commit(const std::map<TopicPartition, int64_t>& offsets) {
  std::string member_id;
  int32_t epoch;
  {
    absl::MutexLock lock(&mu_);
    member_id = member_id_;
    epoch = epoch_;
  }
  return CommitPositions(offsets, member_id, epoch);
}

void GroupConsumer::CommitAsync(std::function<void(absl::Status)> done) {
  struct Call {
    grpc::ClientContext ctx;
    cpb::CommitOffsetsRequest req;
    cpb::CommitOffsetsResponse resp;
  };
  auto call = std::make_shared<Call>();
  {
    absl::ReleasableMutexLock lock(&mu_);
    if (member_id_.empty() || closed_) {
      lock.Release();
      done(absl::FailedPreconditionError("not a member of the group now"));
      return;
    }
    call->req = CommitRequest(positions_, member_id_, epoch_);
    ++async_commits_;
  }
  SetDeadline(&call->ctx);
  coordinator_->async()->CommitOffsets(
      &call->ctx, &call->req, &call->resp,
      [this, call, done = std::move(done)](grpc::Status s) mutable {
        // The context holds a reference to the channel: it goes before this consumer may be
        // destroyed, not with this callback on gRPC's thread (see Producer::SendAsync).
        call.reset();
        done(FromGrpcStatus(s));
        absl::MutexLock lock(&mu_);
        --async_commits_;
      });
}

absl::StatusOr<int> GroupConsumer::ProcessAndCommit(
    absl::Duration timeout, const std::function<absl::Status(const ConsumedRecord&)>& handle) {
  auto records = Poll(timeout);
  if (!records.ok()) return records.status();
  for (size_t i = 0; i < records->size(); ++i) {
    const ConsumedRecord& record = (*records)[i];
    if (auto s = dead_letters_ ? dead_letters_->Handle(record, handle) : handle(record); !s.ok()) {
      // Nothing from the failed record on counts as consumed: the next Poll returns it again.
      std::map<TopicPartition, int64_t> rewind;
      for (size_t j = i; j < records->size(); ++j) {
        const ConsumedRecord& r = (*records)[j];
        auto [it, fresh] = rewind.emplace(TopicPartition{r.topic, r.partition}, r.offset);
        if (!fresh) it->second = std::min(it->second, r.offset);
      }
      absl::MutexLock lock(&mu_);
      for (const auto& [tp, offset] : rewind) {
        auto it = positions_.find(tp);
        if (it != positions_.end()) it->second = std::min(it->second, offset);
      }
      return s;
    }
  }
  if (records->empty()) return 0;
  CONDUIT_RETURN_IF_ERROR(Commit());
  return static_cast<int>(records->size());
}

}  // namespace conduit::client
