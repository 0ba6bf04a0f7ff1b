#include "client/group_consumer.h"

#include <grpcpp/grpcpp.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/grpc/dial.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"
#include "common/status/status_macros.h"

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

void ToProto(const PartitionSet& in,
             google::protobuf::RepeatedPtrField<cpb::TopicPartitions>* out) {
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
  if (options.retry.max_attempts < 1 || options.retry.backoff_initial < absl::ZeroDuration() ||
      options.retry.backoff_max < options.retry.backoff_initial ||
      !(options.retry.backoff_multiplier >= 1)) {
    return absl::InvalidArgumentError(
        "retry: max_attempts >= 1, 0 <= backoff_initial <= backoff_max, multiplier >= 1");
  }
  if (options.dead_letter &&
      (options.dead_letter->queue_address.empty() || options.dead_letter->queue.empty())) {
    return absl::InvalidArgumentError("dead_letter needs a queue address and a queue");
  }
  if (!(options.max_records_per_second >= 0)) {  // also NaN
    return absl::InvalidArgumentError(absl::StrCat(
        "max_records_per_second must not be negative, got ", options.max_records_per_second));
  }
  auto router =
      ClusterRouter::Create({.bootstrap = BootstrapList(options.address, options.bootstrap),
                             .request_timeout = options.request_timeout,
                             .security = options.security});
  if (!router.ok()) return router.status();
  if (options.coordinator_address.empty()) {
    options.coordinator_address = (*router)->answered_address();
  }
  std::unique_ptr<GroupConsumer> c(
      new GroupConsumer(std::move(options), std::move(on_assigned), std::move(on_revoked)));
  c->router_ = *std::move(router);
  CONDUIT_RETURN_IF_ERROR(c->HeartbeatOnce());
  c->heartbeat_ = std::thread([raw = c.get()] { raw->HeartbeatLoop(); });
  return c;
}

GroupConsumer::GroupConsumer(ConsumerOptions options, PartitionsCallback on_assigned,
                             PartitionsCallback on_revoked)
    : options_(std::move(options)),
      on_assigned_(std::move(on_assigned)),
      on_revoked_(std::move(on_revoked)) {
  if (options_.dead_letter) {
    dead_letters_ = std::make_unique<DeadLetterHandler>(
        options_.retry, *options_.dead_letter, options_.group,
        options_.client_id.empty() ? std::string("group-consumer") : options_.client_id);
  }
  if (options_.max_records_per_second > 0 && std::isfinite(options_.max_records_per_second)) {
    limiter_.emplace(options_.max_records_per_second, options_.max_records_per_second,
                     time::SystemClock::Get());
  }
  coordinator_ = cpb::GroupCoordinator::NewStub(
      grpc_util::Dial(options_.coordinator_address, options_.security));
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
    mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &async_commits_));
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
  SetDeadline(&ctx);
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
  PartitionSet owned;
  const cpb::HeartbeatRequest req = HeartbeatRequestFor(&owned);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
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
  return ApplyHeartbeat(owned, resp);
}

cpb::HeartbeatRequest GroupConsumer::HeartbeatRequestFor(PartitionSet* owned) {
  cpb::HeartbeatRequest req;
  req.set_group_id(options_.group);
  {
    absl::MutexLock lock(&mu_);
    req.set_member_id(member_id_);
    req.set_member_epoch(member_id_.empty() ? 0 : epoch_);
    for (const auto& [tp, pos] : positions_) owned->insert(tp);
  }
  if (req.member_epoch() == 0) {
    for (const std::string& t : options_.topics) req.add_subscribed_topics(t);
    grpc_util::SetDuration(options_.session_timeout, req.mutable_session_timeout());
    req.set_instance_id(options_.instance_id);
    req.set_client_id(options_.client_id);
  }
  ToProto(*owned, req.mutable_owned_partitions());
  return req;
}

absl::Status GroupConsumer::ApplyHeartbeat(const PartitionSet& owned,
                                           const cpb::HeartbeatResponse& resp) {
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
    SetDeadline(&ctx);
    cpb::FetchOffsetsRequest req;
    req.set_group_id(options_.group);
    for (const auto& [topic, partition] : partitions) {
      if (req.topics_size() == 0 || req.topics(req.topics_size() - 1) != topic) {
        req.add_topics(topic);  // (a PartitionSet is ordered by topic)
      }
    }
    cpb::FetchOffsetsResponse resp;
    grpc::Status s = coordinator_->FetchOffsets(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s);
    for (const cpb::CommittedOffset& o : resp.offsets()) {
      TopicPartition tp{o.topic(), o.partition()};
      if (partitions.contains(tp)) out[tp] = o.offset();
    }
  }
  // The rest start at the log's start or end, asked of each partition's leader (the partitions
  // of a topic may have different leaders).
  const lpb::OffsetSpec spec = options_.start == ConsumerOptions::Start::kEarliest
                                   ? lpb::OFFSET_SPEC_EARLIEST
                                   : lpb::OFFSET_SPEC_LATEST;
  for (const TopicPartition& tp : partitions) {
    if (out.contains(tp)) continue;
    absl::StatusOr<int64_t> offset = ListOffset(tp, spec);
    if (!offset.ok()) return offset.status();
    out[tp] = *offset;
  }
  return out;
}

absl::StatusOr<int64_t> GroupConsumer::ListOffset(const TopicPartition& tp, lpb::OffsetSpec spec) {
  lpb::ListOffsetsRequest req;
  req.set_topic(tp.first);
  req.add_partitions(tp.second);
  req.set_spec(spec);
  lpb::ListOffsetsResponse resp;
  grpc::Status s = router_->CallLeader(tp.first, tp.second,
                                       [&](ClusterRouter::Stub& stub, grpc::ClientContext& ctx) {
                                         resp.Clear();
                                         return stub.ListOffsets(&ctx, req, &resp);
                                       });
  if (!s.ok()) return FromGrpcStatus(s);
  if (resp.offsets_size() != 1) return absl::InternalError("ListOffsets: one offset expected");
  return resp.offsets(0).offset();
}

void GroupConsumer::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.request_timeout));
}

}  // namespace conduit::client
