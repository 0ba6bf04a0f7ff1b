#include "services/log_broker/api/convert.h"

namespace conduit::log_broker::api {

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t micros = absl::ToUnixMicros(t);
  out->set_seconds(micros / 1'000'000 - (micros % 1'000'000 < 0 ? 1 : 0));
  int64_t rem = micros % 1'000'000;
  if (rem < 0) rem += 1'000'000;
  out->set_nanos(static_cast<int32_t>(rem * 1000));
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

absl::Duration FromDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::StatusOr<TopicConfig> FromProto(const pb::TopicConfig& config) {
  TopicConfig out;
  switch (config.durability()) {
    case pb::DURABILITY_UNSPECIFIED:
    case pb::DURABILITY_SYNC:
      out.durability = Durability::kSync;
      break;
    case pb::DURABILITY_INTERVAL:
      out.durability = Durability::kInterval;
      break;
    default:
      return absl::InvalidArgumentError("unknown durability");
  }
  out.flush_interval = FromDuration(config.flush_interval());
  out.max_record_bytes = config.max_record_bytes();
  return out;
}

void ToProto(const TopicMeta& meta, pb::TopicInfo* out) {
  out->set_name(meta.name);
  out->set_partitions(meta.partitions);
  auto* config = out->mutable_config();
  config->set_durability(meta.config.durability == Durability::kSync ? pb::DURABILITY_SYNC
                                                                     : pb::DURABILITY_INTERVAL);
  const int64_t micros = absl::ToInt64Microseconds(meta.config.flush_interval);
  config->mutable_flush_interval()->set_seconds(micros / 1'000'000);
  config->mutable_flush_interval()->set_nanos(static_cast<int32_t>(micros % 1'000'000) * 1000);
  config->set_max_record_bytes(meta.config.max_record_bytes);
  SetTimestamp(meta.created, out->mutable_created());
}

ProduceRecordArgs FromProto(pb::ProduceRecord&& record) {
  ProduceRecordArgs out;
  if (record.has_partition()) out.partition = record.partition();
  if (record.has_key()) out.data.key = std::move(*record.mutable_key());
  if (record.has_value()) out.data.value = std::move(*record.mutable_value());
  out.data.headers.reserve(record.headers_size());
  for (auto& h : *record.mutable_headers()) {
    out.data.headers.push_back(Header{std::move(*h.mutable_key()), std::move(*h.mutable_value())});
  }
  if (record.has_event_time()) out.data.event_time = FromTimestamp(record.event_time());
  out.data.event_id = std::move(*record.mutable_event_id());
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
}

void ToProto(const TopicDescription& description, pb::DescribeTopicResponse* out) {
  ToProto(description.meta, out->mutable_topic());
  for (const auto& p : description.partitions) {
    auto* info = out->add_partitions();
    info->set_partition(p.partition);
    info->set_log_start_offset(p.log_start_offset);
    info->set_high_watermark(p.high_watermark);
    if (p.newest_append_time != absl::InfinitePast()) {
      SetTimestamp(p.newest_append_time, info->mutable_newest_append_time());
    }
  }
}

FetchArgs FromProto(const pb::FetchRequest& request) {
  FetchArgs args;
  args.topic = request.topic();
  args.partition = request.partition();
  args.offset = request.offset();
  if (request.has_max_records()) args.max_records = request.max_records();
  if (request.has_max_bytes()) args.max_bytes = request.max_bytes();
  args.max_wait = FromDuration(request.max_wait());
  return args;
}

}  // namespace conduit::log_broker::api
