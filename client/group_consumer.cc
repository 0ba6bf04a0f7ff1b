#include "client/group_consumer.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"

namespace conduit::client {

namespace lpb = ::conduit::log::v1;
namespace cpb = ::conduit::coordinator::v1;
using grpc_util::FromGrpcStatus;

namespace {

PartitionSet FromProto(const google::protobuf::RepeatedPtrField<cpb::TopicPartitions>& in) {
  PartitionSet out;
  for (const auto& t : in) {
    for (int32_t p : t.partitions()) out.insert({t.topic(), p});
  }
  return out;
}

void ToProto(const PartitionSet& in, google::protobuf::RepeatedPtrField<cpb::TopicPartitions>* out) {
  cpb::TopicPartitions* current = nullptr;
  for (const auto& [topic, partition] : in) {
    if (!current || current->topic() != topic) {
      current = out->Add();
      current->set_topic(topic);
    }
    current->add_partitions(partition);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupConsumer>> GroupConsumer::Create(
    ConsumerOptions options, PartitionsCallback on_assigned, PartitionsCallback on_revoked) {
  if (options.group.empty() || options.topics.empty()) {
    return absl::InvalidArgumentError("a group consumer needs a group and topics");
  }
  std::unique_ptr<GroupConsumer> c(
      new GroupConsumer(std::move(options), std::move(on_assigned), std::move(on_revoked)));
  if (auto s = c->HeartbeatOnce(); !s.ok()) return s;
  c->heartbeat_ = std::thread([raw = c.get()] { raw->HeartbeatLoop(); });
  return c;
}

GroupConsumer::GroupConsumer(ConsumerOptions options, PartitionsCallback on_assigned,
                             PartitionsCallback on_revoked)
    : options_(std::move(options)),
      on_assigned_(std::move(on_assigned)),
      on_revoked_(std::move(on_revoked)) {
  log_ = lpb::LogService::NewStub(
      grpc::CreateChannel(options_.address, grpc::InsecureChannelCredentials()));
  const std::string& coordinator =
      options_.coordinator_address.empty() ? options_.address : options_.coordinator_address;
  coordinator_ = cpb::GroupCoordinator::NewStub(
      grpc::CreateChannel(coordinator, grpc::InsecureChannelCredentials()));
}

GroupConsumer::~GroupConsumer() { Close(); }

void GroupConsumer::StopThread() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

void GroupConsumer::Close() {
  const bool was_running = heartbeat_.joinable();
  StopThread();
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;  // no CommitAsync may start after this wait
    mu_.Await(absl::Condition(+[](int* n) { return *n == 0; }, &async_commits_));
  }
  if (!was_running) return;
  std::string member_id;
  {
    absl::MutexLock lock(&mu_);
    member_id = std::exchange(member_id_, "");
    positions_.clear();
  }
  if (member_id.empty()) return;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  cpb::LeaveGroupRequest req;
  req.set_group_id(options_.group);
  req.set_member_id(member_id);
  cpb::LeaveGroupResponse resp;
  (void)coordinator_->LeaveGroup(&ctx, req, &resp);
}

void GroupConsumer::Abandon() {
  StopThread();
  absl::MutexLock lock(&mu_);
  member_id_.clear();
  positions_.clear();
}

PartitionSet GroupConsumer::assignment() {
  absl::MutexLock lock(&mu_);
  PartitionSet out;
  for (const auto& [tp, pos] : positions_) out.insert(tp);
  return out;
}

std::string GroupConsumer::member_id() {
  absl::MutexLock lock(&mu_);
  return member_id_;
}

void GroupConsumer::HeartbeatLoop() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval_)) {
    mu_.Unlock();
    (void)HeartbeatOnce();
    mu_.Lock();
  }
}

absl::Status GroupConsumer::HeartbeatOnce() {
  absl::MutexLock beat(&heartbeat_mu_);
  cpb::HeartbeatRequest req;
  req.set_group_id(options_.group);
  PartitionSet owned;
  {
    absl::MutexLock lock(&mu_);
    req.set_member_id(member_id_);
    req.set_member_epoch(member_id_.empty() ? 0 : epoch_);
    for (const auto& [tp, pos] : positions_) owned.insert(tp);
  }
  if (req.member_epoch() == 0) {
    for (const std::string& t : options_.topics) req.add_subscribed_topics(t);
    grpc_util::SetDuration(options_.session_timeout, req.mutable_session_timeout());
    req.set_instance_id(options_.instance_id);
    req.set_client_id(options_.client_id);
  }
  ToProto(owned, req.mutable_owned_partitions());
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  cpb::HeartbeatResponse resp;
  grpc::Status status = coordinator_->Heartbeat(&ctx, req, &resp);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND && req.member_epoch() != 0) {
    // Fenced (session expired): the partitions are lost; rejoin on the next beat.
    if (on_revoked_ && !owned.empty()) on_revoked_(owned);
    absl::MutexLock lock(&mu_);
    member_id_.clear();
    epoch_ = 0;
    positions_.clear();
    return FromGrpcStatus(status);
  }
  if (!status.ok()) return FromGrpcStatus(status);

  const PartitionSet assigned = FromProto(resp.assignment());
  PartitionSet revoked, added;
  for (const TopicPartition& tp : owned) {
    if (!assigned.contains(tp)) revoked.insert(tp);
  }
  for (const TopicPartition& tp : assigned) {
    if (!owned.contains(tp)) added.insert(tp);
  }
  PartitionSet reset;
  for (const TopicPartition& tp : FromProto(resp.reset_partitions())) {
    if (owned.contains(tp) && assigned.contains(tp)) reset.insert(tp);
  }
  {
    absl::MutexLock lock(&mu_);
    member_id_ = resp.member_id();
    interval_ = grpc_util::FromDuration(resp.heartbeat_interval());
  }
  if (!revoked.empty()) {
    // The application may commit what it has processed in on_revoked; nothing is committed for
    // it here, because Poll's positions run ahead of what a handler has finished (committing
    // them could skip records). The next heartbeat releases the partitions.
    if (on_revoked_) on_revoked_(revoked);
    absl::MutexLock lock(&mu_);
    for (const TopicPartition& tp : revoked) positions_.erase(tp);
  }
  PartitionSet fetch = added;
  fetch.insert(reset.begin(), reset.end());
  std::map<TopicPartition, int64_t> start;
  if (!fetch.empty()) {
    auto fetched = StartPositions(fetch);
    // Retried on the next beat, which still carries the old epoch: the coordinator keeps the
    // reset notice and the grant until this member has taken them in.
    if (!fetched.ok()) return fetched.status();
    start = *std::move(fetched);
  }
  {
    // The new epoch and the positions it goes with change together: a Commit never pairs the
    // new epoch with positions from before a reset.
    absl::MutexLock lock(&mu_);
    epoch_ = resp.member_epoch();
    for (const auto& [tp, offset] : start) positions_[tp] = offset;
  }
  if (on_assigned_ && !added.empty()) on_assigned_(added);
  return absl::OkStatus();
}

absl::StatusOr<std::map<TopicPartition, int64_t>> GroupConsumer::StartPositions(
    const PartitionSet& partitions) {
  std::map<TopicPartition, int64_t> out;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
    cpb::FetchOffsetsRequest req;
    req.set_group_id(options_.group);
    cpb::FetchOffsetsResponse resp;
    grpc::Status s = coordinator_->FetchOffsets(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    for (const cpb::CommittedOffset& o : resp.offsets()) {
      TopicPartition tp{o.topic(), o.partition()};
      if (partitions.contains(tp)) out[tp] = o.offset();
    }
  }
  for (const TopicPartition& tp : partitions) {
    if (out.contains(tp)) continue;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
    lpb::ListOffsetsRequest req;
    req.set_topic(tp.first);
    req.add_partitions(tp.second);
    req.set_spec(options_.start == ConsumerOptions::Start::kEarliest ? lpb::OFFSET_SPEC_EARLIEST
                                                                      : lpb::OFFSET_SPEC_LATEST);
    lpb::ListOffsetsResponse resp;
    grpc::Status s = log_->ListOffsets(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    if (resp.offsets_size() != 1) return absl::InternalError("ListOffsets: one offset expected");
    out[tp] = resp.offsets(0).offset();
  }
  return out;
}

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
    const absl::Duration left = deadline - absl::Now();
    for (size_t i = 0; i < owned.size() && out.empty(); ++i) {
      const auto& [tp, position] = owned[(first + i) % owned.size()];
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
      lpb::FetchRequest req;
      req.set_topic(tp.first);
      req.set_partition(tp.second);
      req.set_offset(position);
      req.set_max_records(options_.max_poll_records);
      // Long-poll on the last partition tried, so an idle group does not spin.
      if (i + 1 == owned.size() && left > absl::ZeroDuration()) {
        grpc_util::SetDuration(std::min(left, absl::Milliseconds(200)), req.mutable_max_wait());
      }
      lpb::FetchResponse resp;
      grpc::Status s = log_->Fetch(&ctx, req, &resp);
      int64_t next = position;
      if (s.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
        // Retention passed this position: skip to the log start (the records are gone).
        next = std::max(position, resp.log_start_offset());
        lpb::ListOffsetsRequest lreq;
        lreq.set_topic(tp.first);
        lreq.add_partitions(tp.second);
        lreq.set_spec(lpb::OFFSET_SPEC_EARLIEST);
        lpb::ListOffsetsResponse lresp;
        grpc::ClientContext lctx;
        lctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
        if (log_->ListOffsets(&lctx, lreq, &lresp).ok() && lresp.offsets_size() == 1) {
          next = std::max(position, lresp.offsets(0).offset());
        }
      } else if (!s.ok()) {
        return FromGrpcStatus(s);
      } else {
        next = resp.next_offset();
      }
      absl::MutexLock lock(&mu_);
      auto it = positions_.find(tp);
      if (it == positions_.end() || it->second != position) continue;  // revoked or reset
      it->second = next;
      for (const lpb::Record& r : resp.records()) {
        ConsumedRecord c;
        c.topic = tp.first;
        c.partition = tp.second;
        c.offset = r.offset();
        if (r.has_key()) c.key = r.key();
        if (r.has_value()) c.value = r.value();
        for (const lpb::Header& h : r.headers()) c.headers.emplace_back(h.key(), h.value());
        c.append_time = grpc_util::FromTimestamp(r.append_time());
        if (r.has_event_time()) c.event_time = grpc_util::FromTimestamp(r.event_time());
        out.push_back(std::move(c));
      }
    }
    if (!out.empty() || absl::Now() >= deadline) return out;
    if (owned.empty()) absl::SleepFor(std::min(deadline - absl::Now(), absl::Milliseconds(20)));
  }
}

absl::Status GroupConsumer::CommitPositions(const std::map<TopicPartition, int64_t>& positions,
                                            const std::string& member_id, int32_t epoch) {
  if (positions.empty()) return absl::OkStatus();
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
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  cpb::CommitOffsetsResponse resp;
  return FromGrpcStatus(coordinator_->CommitOffsets(&ctx, req, &resp));
}

absl::Status GroupConsumer::Commit() {
  std::map<TopicPartition, int64_t> positions;
  {
    absl::MutexLock lock(&mu_);
    positions = positions_;
  }
  return Commit(positions);
}

absl::Status GroupConsumer::Commit(const std::map<TopicPartition, int64_t>& offsets) {
  std::string member_id;
  int32_t epoch;
  {
    absl::MutexLock lock(&mu_);
    member_id = member_id_;
    epoch = epoch_;
  }
  if (member_id.empty()) return absl::FailedPreconditionError("not a member of the group now");
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
    call->req.set_group_id(options_.group);
    call->req.set_member_id(member_id_);
    call->req.set_member_epoch(epoch_);
    cpb::TopicCommits* current = nullptr;
    for (const auto& [tp, offset] : positions_) {
      if (!current || current->topic() != tp.first) {
        current = call->req.add_topics();
        current->set_topic(tp.first);
      }
      cpb::PartitionCommit* p = current->add_partitions();
      p->set_partition(tp.second);
      p->set_offset(offset);
    }
    ++async_commits_;
  }
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
  coordinator_->async()->CommitOffsets(
      &call->ctx, &call->req, &call->resp, [this, call, done = std::move(done)](grpc::Status s) {
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
    if (auto s = handle((*records)[i]); !s.ok()) {
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
  if (auto s = Commit(); !s.ok()) return s;
  return static_cast<int>(records->size());
}

}  // namespace conduit::client
