#pragma once

// Conversion between conduit.log.v1's record messages and the domain's records, shared by the
// gRPC API (api/) and replication (replication/). No rules here.

#include <utility>

#include "common/grpc/proto_time.h"
#include "conduit/log/v1/log.pb.h"
#include "services/log_broker/domain/broker_requests.h"
#include "services/log_broker/domain/record.h"

namespace conduit::log_broker::convert {

namespace pb = ::conduit::log::v1;

// The key, value, headers, event time and event id of a ProduceRecord or a Record, moved out.
template <typename RecordMessage>
RecordData TakeRecordData(RecordMessage& record) {
  RecordData out;
  if (record.has_key()) out.key = std::move(*record.mutable_key());
  if (record.has_value()) out.value = std::move(*record.mutable_value());
  out.headers.reserve(record.headers_size());
  for (auto& h : *record.mutable_headers()) {
    out.headers.push_back(Header{std::move(*h.mutable_key()), std::move(*h.mutable_value())});
  }
  if (record.has_event_time()) out.event_time = grpc_util::FromTimestamp(record.event_time());
  out.event_id = std::move(*record.mutable_event_id());
  return out;
}

ProduceRecordArgs FromProto(pb::ProduceRecord&& record);
void ToProto(const StoredRecord& record, pb::Record* out);
// A record as a leader sends it to its followers.
StoredRecord FromProto(pb::Record&& record);

}  // namespace conduit::log_broker::convert
