#pragma once

// Conversion of conduit.log.v1.ReplicaService messages (broker to broker). No rules here.

#include <vector>

#include "conduit/log/v1/replica.grpc.pb.h"
#include "services/log_broker/convert/record_convert.h"
#include "services/log_broker/domain/broker_requests.h"

namespace conduit::log_broker::replication {

namespace pb = ::conduit::log::v1;

// The record conversions replication shares with the gRPC API.
using convert::FromProto;
using convert::ToProto;

std::vector<ReplicaFetchItem> FromProto(const pb::ReplicaFetchRequest& request);
void ToProto(const std::vector<ReplicaFetchItem>& items, pb::ReplicaFetchRequest* out);
void ToProto(std::vector<ReplicaFetchData>&& data, pb::ReplicaFetchResponse* out);
ReplicaFetchData FromProto(pb::ReplicaPartitionData&& data);

}  // namespace conduit::log_broker::replication
