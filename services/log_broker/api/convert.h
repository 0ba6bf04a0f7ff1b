#pragma once

// Conversion between conduit.log.v1 messages and domain types. No rules here.

#include "absl/status/statusor.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::api {

namespace pb = ::conduit::log::v1;

absl::StatusOr<TopicConfigPatch> FromProto(const pb::TopicConfig& config);
void ToProto(const TopicMeta& meta, pb::TopicInfo* out);
ProduceRecordArgs FromProto(pb::ProduceRecord&& record);
void ToProto(const StoredRecord& record, pb::Record* out);
void ToProto(const TopicDescription& description, pb::DescribeTopicResponse* out);
FetchArgs FromProto(const pb::FetchRequest& request);
std::optional<ProducerArgs> ProducerFromProto(const pb::ProduceRequest& request);

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out);
absl::Time FromTimestamp(const google::protobuf::Timestamp& t);
absl::Duration FromDuration(const google::protobuf::Duration& d);

}  // namespace conduit::log_broker::api
