#pragma once

// Conversion of conduit.log.v1.ReplicaService messages (broker to broker). No rules here.

#include <vector>

#include "conduit/log/v1/replica.grpc.pb.h"
#include "services/log_broker/api/convert.h"

namespace conduit::log_broker::api {

StoredRecord FromProto(pb::Record&& record);
std::vector<ReplicaFetchItem> FromProto(const pb::ReplicaFetchRequest& request);
void ToProto(const std::vector<ReplicaFetchItem>& items, pb::ReplicaFetchRequest* out);
void ToProto(std::vector<ReplicaFetchData>&& data, pb::ReplicaFetchResponse* out);
ReplicaFetchData FromProto(pb::ReplicaPartitionData&& data);

}  // namespace conduit::log_broker::api
