#pragma once

#include <grpcpp/grpcpp.h>

// Conversion between conduit.log.v1 messages and domain types. No rules here.

#include <utility>

#include "absl/status/statusor.h"
#include "common/grpc/proto_time.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/convert/record_convert.h"
#include "services/log_broker/convert/topic_convert.h"
#include "services/log_broker/domain/broker.h"

namespace conduit::log_broker::api {

namespace pb = ::conduit::log::v1;

// The conversions api/ shares with cluster/ and replication/ (convert/).
using convert::FromProto;
using convert::TakeRecordData;
using convert::ToProto;

pb::ReplicaRole ToProto(ReplicaRole role);
void ToProto(const TopicDescription& description, pb::DescribeTopicResponse* out);
FetchArgs FromProto(const pb::FetchRequest& request);
std::optional<ProducerArgs> ProducerFromProto(const pb::ProduceRequest& request);
// The view's brokers, controller and the named topics (all when `topics` is empty; NOT_FOUND
// for an unknown one).
absl::Status ToProto(const ClusterView& view,
                     const google::protobuf::RepeatedPtrField<std::string>& topics,
                     pb::GetMetadataResponse* out);

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

// What a produce request carries, for the produce byte quota: keys, values and headers.
double RecordBytes(const pb::ProduceRequest& request);

// grpc_util::CheckTimeFields for a ProduceRequest, with the same statuses and messages, reading
// its one time field, records[].event_time, with the generated accessors instead of reflection:
// the reflection walk took about 2.5 % of the broker's samples in a ProduceStream of one record
// per message (PERFORMANCE-NOTES). convert_test pins the request's time fields.
absl::Status CheckRecordTimes(const pb::ProduceRequest& request);

// An appended request's positions (one per record, in request order) and append time, for a
// ProduceResponse or a ProduceStream answer.
void ToProto(const ProduceResult& result,
             google::protobuf::RepeatedPtrField<pb::RecordPosition>* positions,
             google::protobuf::Timestamp* append_time);
// A ProduceStream message's answer: its positions, or its code and message (with the leader, for
// a not-leader status).
void ToProto(const absl::StatusOr<ProduceResult>& result, pb::ProduceStreamResponse::Answer* out);

// The one status mapping of the log service: a not-leader status also names the leader in the
// trailing metadata documented in log.proto.
grpc::Status Answer(grpc::CallbackServerContext* ctx, const absl::Status& status);

}  // namespace conduit::log_broker::api
