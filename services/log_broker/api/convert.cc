#include "services/log_broker/api/convert.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/request_checks.h"
#include "common/grpc/status.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/not_leader.h"

namespace conduit::log_broker::api {

pb::ReplicaRole ToProto(ReplicaRole role) {
  switch (role) {
    case ReplicaRole::kSole:
      return pb::REPLICA_ROLE_SOLE;
    case ReplicaRole::kLeader:
      return pb::REPLICA_ROLE_LEADER;
    case ReplicaRole::kFollower:
      return pb::REPLICA_ROLE_FOLLOWER;
    case ReplicaRole::kNone:
      return pb::REPLICA_ROLE_NONE;
  }
  return pb::REPLICA_ROLE_UNSPECIFIED;
}

void ToProto(const TopicDescription& description, pb::DescribeTopicResponse* out) {
  ToProto(description.meta, out->mutable_topic());
  out->mutable_topic()->set_replication_factor(description.replication_factor);
  for (const auto& p : description.partitions) {
    auto* info = out->add_partitions();
    info->set_partition(p.partition);
    info->set_log_start_offset(p.meta.log_start_offset);
    info->set_high_watermark(p.high_watermark);
    info->set_log_end_offset(p.meta.next_offset);
    info->set_leader_epoch(p.leader_epoch.value());
    info->set_leader(p.leader);
    info->set_record_count(p.meta.record_count);
    info->set_bytes(p.meta.bytes);
    if (p.meta.record_count > 0 && p.oldest_append_time != absl::InfinitePast()) {
      SetTimestamp(p.oldest_append_time, info->mutable_oldest_append_time());
    }
    if (p.newest_append_time != absl::InfinitePast()) {
      SetTimestamp(p.newest_append_time, info->mutable_newest_append_time());
    }
    if (p.meta.max_event_time != absl::InfinitePast()) {
      SetTimestamp(p.meta.max_event_time, info->mutable_max_event_time());
    }
    const ReplicationDescription& r = p.replication;
    for (int32_t b : r.replicas) info->add_replicas(b);
    for (int32_t b : r.isr) info->add_isr(b);
    info->set_role(ToProto(r.role));
    for (const FollowerLag& f : r.followers) {
      auto* follower = info->add_followers();
      follower->set_broker(f.broker);
      follower->set_log_end_offset(f.log_end_offset);
      follower->set_lag_records(f.lag_records);
      SetDuration(f.since_caught_up, follower->mutable_since_caught_up());
      follower->set_in_sync(f.in_sync);
    }
  }
}

FetchArgs FromProto(const pb::FetchRequest& request) {
  FetchArgs args;
  args.topic = request.topic();
  args.partition = request.partition();
  args.offset = request.offset();
  if (request.has_max_records()) args.max_records = request.max_records();
  if (request.has_max_bytes()) args.max_bytes = request.max_bytes();
  args.max_wait = FromDuration(request.max_wait());
  return args;
}

std::optional<ProducerArgs> ProducerFromProto(const pb::ProduceRequest& request) {
  if (request.producer_id() == 0 && request.sequences_size() == 0) return std::nullopt;
  ProducerArgs args;
  args.producer_id = ProducerId(request.producer_id());
  args.epoch = request.producer_epoch();
  for (const auto& s : request.sequences()) {
    args.base_sequences.emplace_back(s.partition(), s.base_sequence());
  }
  return args;
}

namespace {

void ToProto(const TopicAssignment& t, pb::TopicMetadata* out) {
  out->set_name(t.meta.name);
  out->set_topic_id(t.meta.id.value());
  out->set_replication_factor(t.replication_factor);
  if (!t.placed()) return;  // partitions appear once all are placed
  for (size_t p = 0; p < t.partitions.size(); ++p) {
    auto* info = out->add_partitions();
    info->set_partition(static_cast<int32_t>(p));
    info->set_leader(t.partitions[p]->leader);
    info->set_leader_epoch(t.partitions[p]->leader_epoch.value());
    for (int32_t r : t.partitions[p]->replicas) info->add_replicas(r);
    for (int32_t r : t.partitions[p]->isr) info->add_isr(r);
    for (int32_t r : t.partitions[p]->target_replicas) info->add_target_replicas(r);
  }
}

}  // namespace

absl::Status ToProto(const ClusterView& view,
                     const google::protobuf::RepeatedPtrField<std::string>& topics,
                     pb::GetMetadataResponse* out) {
  for (const auto& [id, b] : view.brokers) {
    auto* broker = out->add_brokers();
    broker->set_id(id);
    broker->set_address(b.address);
  }
  out->set_controller_id(view.controller);
  out->set_controller_epoch(view.controller_epoch);
  if (topics.empty()) {
    for (const auto& [name, t] : view.topics) ToProto(t, out->add_topics());
    return absl::OkStatus();
  }
  for (const std::string& name : topics) {
    const TopicAssignment* t = view.FindTopic(name);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
    ToProto(*t, out->add_topics());
  }
  return absl::OkStatus();
}

double RecordBytes(const pb::ProduceRequest& request) {
  size_t bytes = 0;
  for (const pb::ProduceRecord& r : request.records()) {
    bytes += r.key().size() + r.value().size();
    for (const auto& h : r.headers()) bytes += h.key().size() + h.value().size();
  }
  return static_cast<double>(bytes);
}

absl::Status CheckRecordTimes(const pb::ProduceRequest& request) {
  for (int i = 0; i < request.records_size(); ++i) {
    const pb::ProduceRecord& r = request.records(i);
    if (!r.has_event_time()) continue;
    const google::protobuf::Timestamp& t = r.event_time();
    absl::Status s = grpc_util::CheckTimestampValue(t.seconds(), t.nanos());
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("records[", i, "].event_time ", s.message()));
    }
  }
  return absl::OkStatus();
}

void ToProto(const ProduceResult& result,
             google::protobuf::RepeatedPtrField<pb::RecordPosition>* positions,
             google::protobuf::Timestamp* append_time) {
  positions->Reserve(static_cast<int>(result.positions.size()));
  for (const RecordPosition& p : result.positions) {
    pb::RecordPosition* out = positions->Add();
    out->set_partition(p.partition);
    out->set_offset(p.offset);
    out->set_duplicate(p.duplicate);
  }
  SetTimestamp(result.append_time, append_time);
}

void ToProto(const absl::StatusOr<ProduceResult>& result, pb::ProduceStreamResponse::Answer* out) {
  if (result.ok()) return ToProto(*result, out->mutable_positions(), out->mutable_append_time());
  out->set_code(static_cast<int32_t>(result.status().code()));
  out->set_message(std::string(result.status().message()));
  if (auto hint = LeaderHintOf(result.status())) {
    out->set_leader_id(hint->id);
    out->set_leader_address(hint->address);
    out->set_leader_epoch(hint->epoch.value());
  }
}

// The one status mapping of this service: a not-leader status also names the leader in the
// trailing metadata documented in log.proto.
grpc::Status Answer(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  if (auto hint = LeaderHintOf(status)) {
    ctx->AddTrailingMetadata("conduit-leader-id", std::to_string(hint->id));
    ctx->AddTrailingMetadata("conduit-leader-address", hint->address);
    ctx->AddTrailingMetadata("conduit-leader-epoch", std::to_string(hint->epoch.value()));
  }
  return grpc_util::ToGrpcStatus(status);
}

}  // namespace conduit::log_broker::api
