#include "services/log_broker/convert/topic_convert.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker::convert {

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

absl::StatusOr<std::optional<Acks>> FromProto(pb::Acks acks) {
  switch (acks) {
    case pb::ACKS_UNSPECIFIED:
      return std::nullopt;
    case pb::ACKS_ALL:
      return Acks::kAll;
    case pb::ACKS_LEADER:
      return Acks::kLeader;
    default:
      return absl::InvalidArgumentError("unknown acks");
  }
}

absl::StatusOr<TopicConfigPatch> FromProto(const pb::TopicConfig& config) {
  TopicConfigPatch patch;
  switch (config.durability()) {
    case pb::DURABILITY_UNSPECIFIED:
      break;
    case pb::DURABILITY_SYNC:
      patch.durability = Durability::kSync;
      break;
    case pb::DURABILITY_INTERVAL:
      patch.durability = Durability::kInterval;
      break;
    default:
      return absl::InvalidArgumentError("unknown durability");
  }
  switch (config.cleanup_policy()) {
    case pb::CLEANUP_POLICY_UNSPECIFIED:
      break;
    case pb::CLEANUP_POLICY_DELETE:
      patch.cleanup_policy = CleanupPolicy::kDelete;
      break;
    case pb::CLEANUP_POLICY_COMPACT:
      patch.cleanup_policy = CleanupPolicy::kCompact;
      break;
    case pb::CLEANUP_POLICY_COMPACT_DELETE:
      patch.cleanup_policy = CleanupPolicy::kCompactDelete;
      break;
    default:
      return absl::InvalidArgumentError("unknown cleanup_policy");
  }
  if (config.has_flush_interval()) patch.flush_interval = FromDuration(config.flush_interval());
  if (config.has_max_record_bytes()) patch.max_record_bytes = config.max_record_bytes();
  if (config.has_retention_time()) {
    const absl::Duration d = FromDuration(config.retention_time());
    patch.retention_time = d < absl::ZeroDuration() ? absl::InfiniteDuration() : d;
  }
  if (config.has_retention_bytes()) patch.retention_bytes = config.retention_bytes();
  if (config.has_tombstone_retention()) {
    patch.tombstone_retention = FromDuration(config.tombstone_retention());
  }
  if (config.has_dedup_window()) patch.dedup_window = FromDuration(config.dedup_window());
  if (config.has_min_insync_replicas()) patch.min_insync_replicas = config.min_insync_replicas();
  CONDUIT_ASSIGN_OR_RETURN(std::optional<Acks> acks, FromProto(config.acks()));
  if (acks) patch.acks = *acks;
  if (config.has_unclean_leader_election()) {
    patch.unclean_leader_election = config.unclean_leader_election();
  }
  return patch;
}

void ToProto(const TopicMeta& meta, pb::TopicInfo* out) {
  const TopicConfig& c = meta.config;
  out->set_name(meta.name);
  out->set_partitions(meta.partitions);
  auto* config = out->mutable_config();
  config->set_durability(c.durability == Durability::kSync ? pb::DURABILITY_SYNC
                                                           : pb::DURABILITY_INTERVAL);
  SetDuration(c.flush_interval, config->mutable_flush_interval());
  config->set_max_record_bytes(c.max_record_bytes);
  if (c.retention_time == absl::InfiniteDuration()) {
    config->mutable_retention_time()->set_seconds(-1);
  } else {
    SetDuration(c.retention_time, config->mutable_retention_time());
  }
  config->set_retention_bytes(c.retention_bytes);
  switch (c.cleanup_policy) {
    case CleanupPolicy::kDelete:
      config->set_cleanup_policy(pb::CLEANUP_POLICY_DELETE);
      break;
    case CleanupPolicy::kCompact:
      config->set_cleanup_policy(pb::CLEANUP_POLICY_COMPACT);
      break;
    case CleanupPolicy::kCompactDelete:
      config->set_cleanup_policy(pb::CLEANUP_POLICY_COMPACT_DELETE);
      break;
  }
  SetDuration(c.tombstone_retention, config->mutable_tombstone_retention());
  SetDuration(c.dedup_window, config->mutable_dedup_window());
  config->set_min_insync_replicas(c.min_insync_replicas);
  config->set_acks(c.acks == Acks::kAll ? pb::ACKS_ALL : pb::ACKS_LEADER);
  config->set_unclean_leader_election(c.unclean_leader_election);
  SetTimestamp(meta.created, out->mutable_created());
}

}  // namespace conduit::log_broker::convert
