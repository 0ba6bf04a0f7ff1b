#pragma once

// conduit.coordinator.v1 messages <-> domain values.

#include "conduit/coordinator/v1/coordinator.pb.h"
#include "services/coordinator/domain/group_coordinator.h"

namespace conduit::coordinator::api {

namespace pb = ::conduit::coordinator::v1;

PartitionSet FromProto(const google::protobuf::RepeatedPtrField<pb::TopicPartitions>& in);
void ToProto(const PartitionSet& in, google::protobuf::RepeatedPtrField<pb::TopicPartitions>* out);

// INVALID_ARGUMENT for a heartbeat over the size limits (checked before anything is copied).
absl::StatusOr<HeartbeatInput> FromProto(const pb::HeartbeatRequest& req, std::string client_host);
void ToProto(const HeartbeatOutput& in, pb::HeartbeatResponse* out);

CommitInput FromProto(const pb::CommitOffsetsRequest& req);
void ToProto(const OffsetRecord& in, pb::CommittedOffset* out);

// INVALID_ARGUMENT when no target is set, or to_earliest / to_latest is set to false. (Two
// targets on the wire are one: protobuf keeps the last member of a oneof it reads.)
absl::StatusOr<ResetInput> FromProto(const pb::ResetOffsetsRequest& req, std::string peer);
void ToProto(const PartitionReset& in, pb::PartitionReset* out);
void ToProto(const AuditRecord& in, pb::AuditEntry* out);

void ToProto(const GroupDescription& in, pb::DescribeGroupResponse* out);
pb::GroupState ToProto(GroupState state);

}  // namespace conduit::coordinator::api
