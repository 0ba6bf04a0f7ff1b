#include "services/coordinator/api/convert.h"

#include <algorithm>

#include "common/grpc/proto_time.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/validation.h"

namespace conduit::coordinator::api {

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

PartitionSet FromProto(const google::protobuf::RepeatedPtrField<pb::TopicPartitions>& in) {
  PartitionSet out;
  for (const pb::TopicPartitions& t : in) {
    for (int32_t p : t.partitions()) out.insert({t.topic(), p});
  }
  return out;
}

void ToProto(const PartitionSet& in, google::protobuf::RepeatedPtrField<pb::TopicPartitions>* out) {
  pb::TopicPartitions* current = nullptr;
  for (const TopicPartition& tp : in) {
    if (!current || current->topic() != tp.topic) {
      current = out->Add();
      current->set_topic(tp.topic);
    }
    current->add_partitions(tp.partition);
  }
}

absl::StatusOr<HeartbeatInput> FromProto(const pb::HeartbeatRequest& req, std::string client_host) {
  size_t subscription_bytes = 0, owned = 0;
  for (const std::string& topic : req.subscribed_topics()) subscription_bytes += topic.size();
  for (const pb::TopicPartitions& t : req.owned_partitions()) owned += t.partitions_size();
  CONDUIT_RETURN_IF_ERROR(
      ValidateHeartbeatSize(req.subscribed_topics_size(), subscription_bytes, owned));
  HeartbeatInput in;
  in.group_id = req.group_id();
  in.member_id = req.member_id();
  in.member_epoch = MemberEpoch(req.member_epoch());
  in.instance_id = req.instance_id();
  in.subscription.assign(req.subscribed_topics().begin(), req.subscribed_topics().end());
  std::sort(in.subscription.begin(), in.subscription.end());
  in.subscription.erase(std::unique(in.subscription.begin(), in.subscription.end()),
                        in.subscription.end());
  in.owned = FromProto(req.owned_partitions());
  if (req.has_session_timeout()) in.session_timeout = FromDuration(req.session_timeout());
  in.client_id = req.client_id();
  in.client_host = std::move(client_host);
  return in;
}

void ToProto(const HeartbeatOutput& in, pb::HeartbeatResponse* out) {
  out->set_member_id(in.member_id);
  out->set_member_epoch(in.member_epoch.value());
  SetDuration(in.heartbeat_interval, out->mutable_heartbeat_interval());
  ToProto(in.assignment, out->mutable_assignment());
  ToProto(in.pending, out->mutable_pending_partitions());
  ToProto(in.resets, out->mutable_reset_partitions());
  out->set_group_epoch(in.group_epoch.value());
}

CommitInput FromProto(const pb::CommitOffsetsRequest& req) {
  CommitInput in;
  in.group_id = req.group_id();
  in.member_id = req.member_id();
  in.member_epoch = MemberEpoch(req.member_epoch());
  for (const pb::TopicCommits& t : req.topics()) {
    for (const pb::PartitionCommit& p : t.partitions()) {
      in.entries.push_back({{t.topic(), p.partition()}, p.offset(), p.metadata()});
    }
  }
  return in;
}

void ToProto(const OffsetRecord& in, pb::CommittedOffset* out) {
  out->set_topic(in.tp.topic);
  out->set_partition(in.tp.partition);
  out->set_offset(in.offset);
  out->set_metadata(in.metadata);
  SetTimestamp(in.commit_time, out->mutable_commit_time());
  out->set_committed_by(in.committed_by);
  out->set_member_epoch(in.member_epoch.value());
}

absl::StatusOr<ResetInput> FromProto(const pb::ResetOffsetsRequest& req, std::string peer) {
  ResetInput in;
  in.group_id = req.group_id();
  in.topic = req.topic();
  in.partitions.assign(req.partitions().begin(), req.partitions().end());
  switch (req.target_case()) {
    case pb::ResetOffsetsRequest::kToEarliest:
      if (!req.to_earliest())
        return absl::InvalidArgumentError("to_earliest must be true when set");
      in.kind = ResetInput::Kind::kEarliest;
      break;
    case pb::ResetOffsetsRequest::kToLatest:
      if (!req.to_latest()) return absl::InvalidArgumentError("to_latest must be true when set");
      in.kind = ResetInput::Kind::kLatest;
      break;
    case pb::ResetOffsetsRequest::kToTimestamp:
      in.kind = ResetInput::Kind::kTimestamp;
      in.timestamp = FromTimestamp(req.to_timestamp());
      break;
    case pb::ResetOffsetsRequest::kToOffset:
      in.kind = ResetInput::Kind::kOffset;
      in.value = req.to_offset();
      break;
    case pb::ResetOffsetsRequest::kShiftBy:
      in.kind = ResetInput::Kind::kShift;
      in.value = req.shift_by();
      break;
    case pb::ResetOffsetsRequest::TARGET_NOT_SET:
      return absl::InvalidArgumentError(
          "set one target: to_earliest, to_latest, to_timestamp, to_offset or shift_by");
  }
  in.execute = req.execute();
  in.actor = req.actor();
  in.peer = std::move(peer);
  in.reason = req.reason();
  return in;
}

void ToProto(const PartitionReset& in, pb::PartitionReset* out) {
  out->set_partition(in.partition);
  out->set_had_offset(in.had_offset);
  out->set_before(in.before);
  out->set_after(in.after);
  out->set_owner_member_id(in.owner_member_id);
}

void ToProto(const AuditRecord& in, pb::AuditEntry* out) {
  out->set_id(in.id);
  SetTimestamp(in.time, out->mutable_time());
  out->set_action(in.action);
  out->set_actor(in.actor);
  out->set_peer(in.peer);
  out->set_reason(in.reason);
  out->set_spec(in.spec);
  out->set_topic(in.topic);
  for (const PartitionReset& r : in.partitions) ToProto(r, out->add_partitions());
  out->set_group_epoch(in.group_epoch.value());
}

pb::GroupState ToProto(GroupState state) {
  switch (state) {
    case GroupState::kEmpty:
      return pb::GROUP_STATE_EMPTY;
    case GroupState::kStable:
      return pb::GROUP_STATE_STABLE;
    case GroupState::kReconciling:
      return pb::GROUP_STATE_RECONCILING;
  }
  return pb::GROUP_STATE_UNSPECIFIED;
}

void ToProto(const GroupDescription& in, pb::DescribeGroupResponse* out) {
  out->set_group_id(in.group_id);
  out->set_state(ToProto(in.state));
  out->set_group_epoch(in.epoch.value());
  out->set_rebalances(in.rebalances);
  out->set_max_lag_records(in.max_lag_records);
  out->set_max_lag_seconds(in.max_lag_seconds);
  out->set_broker_error(in.broker_error);
  for (const MemberView& m : in.members) {
    pb::MemberDescription* d = out->add_members();
    const MemberRecord& r = m.record;
    d->set_member_id(r.member_id);
    d->set_instance_id(r.instance_id);
    d->set_client_id(r.client_id);
    d->set_client_host(r.client_host);
    d->set_member_epoch(r.epoch.value());
    for (const std::string& t : r.subscription) d->add_subscribed_topics(t);
    PartitionSet owned;
    for (const auto& [tp, since] : r.owned) owned.insert(tp);
    ToProto(owned, d->mutable_assignment());
    ToProto(r.revoking, d->mutable_revoking());
    ToProto(m.pending, d->mutable_pending());
    SetDuration(r.session_timeout, d->mutable_session_timeout());
    SetTimestamp(m.last_heartbeat, d->mutable_last_heartbeat());
  }
  for (const PartitionLagView& v : in.partitions) {
    pb::PartitionLag* p = out->add_partitions();
    p->set_topic(v.tp.topic);
    p->set_partition(v.tp.partition);
    p->set_owner_member_id(v.owner);
    p->set_has_committed_offset(v.committed.has_value());
    if (v.committed) {
      p->set_committed_offset(v.committed->offset);
      SetTimestamp(v.committed->commit_time, p->mutable_commit_time());
    }
    p->set_log_start_offset(v.log_start);
    p->set_high_watermark(v.high_watermark);
    p->set_lag_records(v.lag_records);
    p->set_lag_seconds(v.lag_seconds);
    if (v.first_unprocessed_append_time) {
      SetTimestamp(*v.first_unprocessed_append_time, p->mutable_first_unprocessed_append_time());
    }
    p->set_drain_rate(v.drain_rate);
    if (v.catch_up_seconds) p->set_catch_up_seconds(*v.catch_up_seconds);
  }
}

}  // namespace conduit::coordinator::api
