#include "services/log_broker/convert/record_convert.h"

namespace conduit::log_broker::convert {

using grpc_util::FromDuration;
using grpc_util::FromTimestamp;
using grpc_util::SetDuration;
using grpc_util::SetTimestamp;

ProduceRecordArgs FromProto(pb::ProduceRecord&& record) {
  ProduceRecordArgs out;
  if (record.has_partition()) out.partition = record.partition();
  out.data = TakeRecordData(record);
  return out;
}

void ToProto(const StoredRecord& record, pb::Record* out) {
  out->set_partition(record.partition);
  out->set_offset(record.offset);
  if (record.data.key) out->set_key(*record.data.key);
  if (record.data.value) out->set_value(*record.data.value);
  for (const auto& h : record.data.headers) {
    auto* header = out->add_headers();
    header->set_key(h.key);
    header->set_value(h.value);
  }
  if (record.data.event_time) SetTimestamp(*record.data.event_time, out->mutable_event_time());
  SetTimestamp(record.append_time, out->mutable_append_time());
  out->set_event_id(record.data.event_id);
  out->set_leader_epoch(record.leader_epoch.value());
}

StoredRecord FromProto(pb::Record&& record) {
  StoredRecord out;
  out.partition = record.partition();
  out.offset = record.offset();
  out.append_time = FromTimestamp(record.append_time());
  out.leader_epoch = LeaderEpoch(record.leader_epoch());
  out.data = TakeRecordData(record);
  return out;
}

}  // namespace conduit::log_broker::convert
