#include "services/log_broker/storage/codec.h"

#include "services/log_broker/storage/coding.h"

namespace conduit::log_broker::codec {
namespace {

constexpr uint8_t kRecordVersion = 1;
constexpr uint8_t kTopicMetaVersion = 1;
constexpr uint8_t kHasKey = 1, kHasValue = 2, kHasEventTime = 4;

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(std::string("corrupt ") + std::string(what));
}

}  // namespace

void EncodeRecord(const RecordData& data, absl::Time append_time, std::string* out) {
  out->clear();
  uint8_t flags = (data.key ? kHasKey : 0) | (data.value ? kHasValue : 0) |
                  (data.event_time ? kHasEventTime : 0);
  out->push_back(static_cast<char>(kRecordVersion));
  out->push_back(static_cast<char>(flags));
  coding::PutBigEndian64(out, static_cast<uint64_t>(absl::ToUnixMicros(append_time)));
  if (data.event_time) {
    coding::PutBigEndian64(out, static_cast<uint64_t>(absl::ToUnixMicros(*data.event_time)));
  }
  if (data.key) coding::PutLengthPrefixed(out, *data.key);
  if (data.value) coding::PutLengthPrefixed(out, *data.value);
  coding::PutLengthPrefixed(out, data.event_id);
  coding::PutVarint64(out, data.headers.size());
  for (const Header& h : data.headers) {
    coding::PutLengthPrefixed(out, h.key);
    coding::PutLengthPrefixed(out, h.value);
  }
}

absl::Status DecodeRecord(std::string_view in, absl::Time* append_time, RecordData* data) {
  uint8_t version = 0, flags = 0;
  uint64_t micros = 0;
  if (!coding::GetByte(&in, &version) || version != kRecordVersion ||
      !coding::GetByte(&in, &flags) || !coding::GetFixed64(&in, &micros)) {
    return Corrupt("record header");
  }
  *append_time = absl::FromUnixMicros(static_cast<int64_t>(micros));
  if (flags & kHasEventTime) {
    if (!coding::GetFixed64(&in, &micros)) return Corrupt("record event time");
    data->event_time = absl::FromUnixMicros(static_cast<int64_t>(micros));
  }
  std::string_view s;
  if (flags & kHasKey) {
    if (!coding::GetLengthPrefixed(&in, &s)) return Corrupt("record key");
    data->key = std::string(s);
  }
  if (flags & kHasValue) {
    if (!coding::GetLengthPrefixed(&in, &s)) return Corrupt("record value");
    data->value = std::string(s);
  }
  if (!coding::GetLengthPrefixed(&in, &s)) return Corrupt("record event id");
  data->event_id = std::string(s);
  uint64_t headers = 0;
  if (!coding::GetVarint64(&in, &headers) || headers > in.size()) return Corrupt("record headers");
  data->headers.reserve(headers);
  for (uint64_t i = 0; i < headers; ++i) {
    std::string_view k, v;
    if (!coding::GetLengthPrefixed(&in, &k) || !coding::GetLengthPrefixed(&in, &v)) {
      return Corrupt("record header");
    }
    data->headers.push_back(Header{std::string(k), std::string(v)});
  }
  return absl::OkStatus();
}

std::string EncodeTopicMeta(const TopicMeta& meta) {
  std::string out;
  out.push_back(static_cast<char>(kTopicMetaVersion));
  coding::PutBigEndian64(&out, meta.id);
  coding::PutLengthPrefixed(&out, meta.name);
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.partitions));
  out.push_back(static_cast<char>(meta.config.durability == Durability::kSync ? 0 : 1));
  coding::PutVarint64(&out, static_cast<uint64_t>(absl::ToInt64Microseconds(meta.config.flush_interval)));
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.config.max_record_bytes));
  coding::PutBigEndian64(&out, static_cast<uint64_t>(absl::ToUnixMicros(meta.created)));
  return out;
}

absl::StatusOr<TopicMeta> DecodeTopicMeta(std::string_view in) {
  TopicMeta meta;
  uint8_t version = 0, durability = 0;
  uint64_t partitions = 0, flush_us = 0, max_record = 0, created = 0;
  std::string_view name;
  if (!coding::GetByte(&in, &version) || version != kTopicMetaVersion ||
      !coding::GetFixed64(&in, &meta.id) || !coding::GetLengthPrefixed(&in, &name) ||
      !coding::GetVarint64(&in, &partitions) || !coding::GetByte(&in, &durability) ||
      !coding::GetVarint64(&in, &flush_us) || !coding::GetVarint64(&in, &max_record) ||
      !coding::GetFixed64(&in, &created) || durability > 1) {
    return Corrupt("topic metadata");
  }
  meta.name = std::string(name);
  meta.partitions = static_cast<int32_t>(partitions);
  meta.config.durability = durability == 0 ? Durability::kSync : Durability::kInterval;
  meta.config.flush_interval = absl::Microseconds(static_cast<int64_t>(flush_us));
  meta.config.max_record_bytes = static_cast<int32_t>(max_record);
  meta.created = absl::FromUnixMicros(static_cast<int64_t>(created));
  return meta;
}

}  // namespace conduit::log_broker::codec
