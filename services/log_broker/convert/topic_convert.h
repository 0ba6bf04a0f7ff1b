#pragma once

// Conversion between conduit.log.v1's topic messages and the domain's topic types, shared by the
// gRPC API (api/) and the cluster metadata kept in etcd as their JSON (cluster/). No rules here.

#include <optional>

#include "absl/status/statusor.h"
#include "conduit/log/v1/log.pb.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker::convert {

namespace pb = ::conduit::log::v1;

absl::StatusOr<TopicConfigPatch> FromProto(const pb::TopicConfig& config);
// nullopt for ACKS_UNSPECIFIED (the topic's setting).
absl::StatusOr<std::optional<Acks>> FromProto(pb::Acks acks);
void ToProto(const TopicMeta& meta, pb::TopicInfo* out);

}  // namespace conduit::log_broker::convert
