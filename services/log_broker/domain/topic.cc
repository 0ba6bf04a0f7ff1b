#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

TopicConfig TopicConfigPatch::ApplyTo(TopicConfig base) const {
  if (durability) base.durability = *durability;
  if (flush_interval) base.flush_interval = *flush_interval;
  if (max_record_bytes) base.max_record_bytes = *max_record_bytes;
  if (retention_time) base.retention_time = *retention_time;
  if (retention_bytes) base.retention_bytes = *retention_bytes;
  if (cleanup_policy) base.cleanup_policy = *cleanup_policy;
  if (tombstone_retention) base.tombstone_retention = *tombstone_retention;
  if (dedup_window) base.dedup_window = *dedup_window;
  if (min_insync_replicas) base.min_insync_replicas = *min_insync_replicas;
  if (acks) base.acks = *acks;
  if (unclean_leader_election) base.unclean_leader_election = *unclean_leader_election;
  return base;
}

}  // namespace conduit::log_broker
