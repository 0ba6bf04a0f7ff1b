#include "services/log_broker/storage/codec.h"

#include "common/coding/coding.h"
#include "common/coding/time_coding.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker::codec {
namespace {

constexpr uint8_t kRecordVersion = 3;         // 1 (leader epoch 0) and 2 are still read
constexpr uint8_t kPartitionMetaVersion = 2;  // 1 is still read (leader epoch 0)
constexpr uint8_t kTopicMetaVersion = 3;
constexpr uint8_t kHasKey = 1, kHasValue = 2, kHasEventTime = 4, kHasProducer = 8;

absl::Status Corrupt(std::string_view what) {
  return absl::DataLossError(std::string("corrupt ") + std::string(what));
}

}  // namespace

void EncodeRecord(const RecordData& data, absl::Time append_time, int32_t leader_epoch,
                  std::string* out, const ProducerTag* producer) {
  out->clear();
  uint8_t flags = (data.key ? kHasKey : 0) | (data.value ? kHasValue : 0) |
                  (data.event_time ? kHasEventTime : 0) | (producer ? kHasProducer : 0);
  out->push_back(static_cast<char>(kRecordVersion));
  out->push_back(static_cast<char>(flags));
  coding::PutBigEndian64(out, static_cast<uint64_t>(absl::ToUnixMicros(append_time)));
  coding::PutBigEndian32(out, static_cast<uint32_t>(leader_epoch));
  if (producer) {
    coding::PutBigEndian64(out, static_cast<uint64_t>(producer->producer_id));
    coding::PutBigEndian32(out, static_cast<uint32_t>(producer->epoch));
    coding::PutBigEndian32(out, static_cast<uint32_t>(producer->base_sequence));
    coding::PutVarint64(out, static_cast<uint64_t>(producer->count));
    coding::PutVarint64(out, static_cast<uint64_t>(producer->index));
  }
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

absl::Status DecodeRecordView(
    std::string_view in, RecordView* out,
    absl::FunctionRef<void(std::string_view key, std::string_view value)> header) {
  uint8_t version = 0, flags = 0;
  uint64_t micros = 0;
  if (!coding::GetByte(&in, &version) || version < 1 || version > kRecordVersion ||
      !coding::GetByte(&in, &flags) || !coding::GetFixed64(&in, &micros)) {
    return Corrupt("record header");
  }
  out->append_time = absl::FromUnixMicros(static_cast<int64_t>(micros));
  out->leader_epoch = 0;
  if (version >= 2) {
    if (in.size() < 4) return Corrupt("record leader epoch");
    out->leader_epoch = static_cast<int32_t>(coding::ReadBigEndian32(in.data()));
    in.remove_prefix(4);
    if (out->leader_epoch < 0) return Corrupt("record leader epoch");
  }
  out->producer.reset();
  if (flags & kHasProducer) {
    uint64_t id = 0, count = 0, index = 0;
    if (!coding::GetFixed64(&in, &id) || in.size() < 8) return Corrupt("record producer");
    ProducerTag tag;
    tag.producer_id = static_cast<int64_t>(id);
    tag.epoch = static_cast<int32_t>(coding::ReadBigEndian32(in.data()));
    tag.base_sequence = static_cast<int32_t>(coding::ReadBigEndian32(in.data() + 4));
    in.remove_prefix(8);
    if (!coding::GetVarint64(&in, &count) || !coding::GetVarint64(&in, &index) ||
        index >= count || count > INT32_MAX) {
      return Corrupt("record producer");
    }
    tag.count = static_cast<int32_t>(count);
    tag.index = static_cast<int32_t>(index);
    out->producer = tag;
  }
  out->event_time.reset();
  if (flags & kHasEventTime) {
    if (!coding::GetFixed64(&in, &micros)) return Corrupt("record event time");
    out->event_time = absl::FromUnixMicros(static_cast<int64_t>(micros));
  }
  std::string_view s;
  out->key.reset();
  if (flags & kHasKey) {
    if (!coding::GetLengthPrefixed(&in, &s)) return Corrupt("record key");
    out->key = s;
  }
  out->value.reset();
  if (flags & kHasValue) {
    if (!coding::GetLengthPrefixed(&in, &s)) return Corrupt("record value");
    out->value = s;
  }
  if (!coding::GetLengthPrefixed(&in, &out->event_id)) return Corrupt("record event id");
  out->payload_bytes = static_cast<int64_t>((out->key ? out->key->size() : 0) +
                                            (out->value ? out->value->size() : 0));
  uint64_t headers = 0;
  if (!coding::GetVarint64(&in, &headers) || headers > in.size()) return Corrupt("record headers");
  for (uint64_t i = 0; i < headers; ++i) {
    std::string_view k, v;
    if (!coding::GetLengthPrefixed(&in, &k) || !coding::GetLengthPrefixed(&in, &v)) {
      return Corrupt("record header");
    }
    out->payload_bytes += static_cast<int64_t>(k.size() + v.size());
    header(k, v);
  }
  return absl::OkStatus();
}

absl::Status DecodeRecord(std::string_view in, absl::Time* append_time, int32_t* leader_epoch,
                          RecordData* data, std::optional<ProducerTag>* producer) {
  RecordView view;
  CONDUIT_RETURN_IF_ERROR(DecodeRecordView(in, &view, [&](std::string_view k, std::string_view v) {
    data->headers.push_back(Header{std::string(k), std::string(v)});
  }));
  *append_time = view.append_time;
  *leader_epoch = view.leader_epoch;
  if (producer != nullptr && view.producer) *producer = view.producer;
  if (view.event_time) data->event_time = view.event_time;
  if (view.key) data->key = std::string(*view.key);
  if (view.value) data->value = std::string(*view.value);
  data->event_id = std::string(view.event_id);
  return absl::OkStatus();
}

void AppendEncodedRecord(int64_t offset, std::string_view value, std::string* out) {
  coding::PutVarint64(out, static_cast<uint64_t>(offset));
  coding::PutLengthPrefixed(out, value);
}

absl::StatusOr<bool> NextEncodedRecord(std::string_view* in, int64_t* offset,
                                       std::string_view* value) {
  if (in->empty()) return false;
  uint64_t o = 0;
  if (!coding::GetVarint64(in, &o) || o > static_cast<uint64_t>(INT64_MAX) ||
      !coding::GetLengthPrefixed(in, value)) {
    return Corrupt("encoded records");
  }
  *offset = static_cast<int64_t>(o);
  return true;
}

absl::Status ForEachRecordInEntry(
    int64_t key_offset, std::string_view entry,
    absl::FunctionRef<absl::StatusOr<bool>(int64_t offset, std::string_view value)> fn) {
  if (!IsChunk(entry)) return fn(key_offset, entry).status();
  entry.remove_prefix(1);
  int64_t offset = 0, last = key_offset - 1;
  std::string_view value;
  while (true) {
    absl::StatusOr<bool> next = NextEncodedRecord(&entry, &offset, &value);
    if (!next.ok()) return next.status();
    if (!*next) return absl::OkStatus();
    if (offset <= last) return Corrupt("record chunk offsets");
    last = offset;
    absl::StatusOr<bool> more = fn(offset, value);
    if (!more.ok()) return more.status();
    if (!*more) return absl::OkStatus();
  }
}

std::string EncodeTopicMeta(const TopicMeta& meta) {
  const TopicConfig& c = meta.config;
  std::string out;
  out.push_back(static_cast<char>(kTopicMetaVersion));
  coding::PutBigEndian64(&out, meta.id.value());
  coding::PutLengthPrefixed(&out, meta.name);
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.partitions));
  out.push_back(static_cast<char>(c.durability == Durability::kSync ? 0 : 1));
  coding::PutVarint64(&out, static_cast<uint64_t>(absl::ToInt64Microseconds(c.flush_interval)));
  coding::PutVarint64(&out, static_cast<uint64_t>(c.max_record_bytes));
  coding::PutBigEndian64(&out, static_cast<uint64_t>(absl::ToUnixMicros(meta.created)));
  const int64_t retention = c.retention_time == absl::InfiniteDuration()
                                ? -1
                                : absl::ToInt64Microseconds(c.retention_time);
  coding::PutBigEndian64(&out, static_cast<uint64_t>(retention));
  coding::PutBigEndian64(&out, static_cast<uint64_t>(c.retention_bytes));
  out.push_back(static_cast<char>(c.cleanup_policy));
  coding::PutVarint64(&out, static_cast<uint64_t>(absl::ToInt64Microseconds(c.tombstone_retention)));
  coding::PutVarint64(&out, static_cast<uint64_t>(absl::ToInt64Microseconds(c.dedup_window)));
  coding::PutVarint64(&out, static_cast<uint64_t>(c.min_insync_replicas));
  out.push_back(static_cast<char>(c.acks == Acks::kAll ? 0 : 1));
  out.push_back(static_cast<char>(c.unclean_leader_election ? 1 : 0));
  return out;
}

absl::StatusOr<TopicMeta> DecodeTopicMeta(std::string_view in) {
  TopicMeta meta;
  uint8_t version = 0, durability = 0;
  uint64_t id = 0, partitions = 0, flush_us = 0, max_record = 0, created = 0;
  std::string_view name;
  if (!coding::GetByte(&in, &version) || version < 1 || version > kTopicMetaVersion ||
      !coding::GetFixed64(&in, &id) || !coding::GetLengthPrefixed(&in, &name) ||
      !coding::GetVarint64(&in, &partitions) || !coding::GetByte(&in, &durability) ||
      !coding::GetVarint64(&in, &flush_us) || !coding::GetVarint64(&in, &max_record) ||
      !coding::GetFixed64(&in, &created) || durability > 1) {
    return Corrupt("topic metadata");
  }
  meta.id = TopicId(id);
  meta.name = std::string(name);
  meta.partitions = static_cast<int32_t>(partitions);
  TopicConfig& c = meta.config;
  c.durability = durability == 0 ? Durability::kSync : Durability::kInterval;
  c.flush_interval = absl::Microseconds(static_cast<int64_t>(flush_us));
  c.max_record_bytes = static_cast<int32_t>(max_record);
  meta.created = absl::FromUnixMicros(static_cast<int64_t>(created));
  if (version == 1) return meta;  // later fields keep their defaults
  uint64_t retention = 0, retention_bytes = 0, tombstone = 0, dedup = 0;
  uint8_t policy = 0;
  if (!coding::GetFixed64(&in, &retention) || !coding::GetFixed64(&in, &retention_bytes) ||
      !coding::GetByte(&in, &policy) || policy > 2 || !coding::GetVarint64(&in, &tombstone) ||
      !coding::GetVarint64(&in, &dedup)) {
    return Corrupt("topic metadata");
  }
  c.retention_time = static_cast<int64_t>(retention) < 0
                         ? absl::InfiniteDuration()
                         : absl::Microseconds(static_cast<int64_t>(retention));
  c.retention_bytes = static_cast<int64_t>(retention_bytes);
  c.cleanup_policy = static_cast<CleanupPolicy>(policy);
  c.tombstone_retention = absl::Microseconds(static_cast<int64_t>(tombstone));
  c.dedup_window = absl::Microseconds(static_cast<int64_t>(dedup));
  if (version == 2) return meta;
  uint64_t min_insync = 0;
  uint8_t acks = 0, unclean = 0;
  if (!coding::GetVarint64(&in, &min_insync) || min_insync < 1 || !coding::GetByte(&in, &acks) ||
      acks > 1 || !coding::GetByte(&in, &unclean) || unclean > 1) {
    return Corrupt("topic metadata");
  }
  c.min_insync_replicas = static_cast<int32_t>(min_insync);
  c.acks = acks == 0 ? Acks::kAll : Acks::kLeader;
  c.unclean_leader_election = unclean == 1;
  return meta;
}

namespace {

using coding::GetTime;
using coding::PutTime;

bool GetInt64(std::string_view* in, int64_t* v) {
  uint64_t raw = 0;
  if (!coding::GetVarint64(in, &raw)) return false;
  *v = static_cast<int64_t>(raw);
  return true;
}

// A non-negative int32 (what every encoder here writes with PutVarint64). A value above
// INT32_MAX is corruption: reading it as a negative number would decode what no encoder writes
// (found by tests/fuzz/log_codec_fuzz).
bool GetInt32(std::string_view* in, int32_t* v) {
  uint64_t raw = 0;
  if (!coding::GetVarint64(in, &raw) || raw > INT32_MAX) return false;
  *v = static_cast<int32_t>(raw);
  return true;
}

bool CheckVersion(std::string_view* in) {
  uint8_t version = 0;
  return coding::GetByte(in, &version) && version == 1;
}

}  // namespace

std::string EncodePartitionMeta(const PartitionMeta& meta) {
  std::string out(1, static_cast<char>(kPartitionMetaVersion));
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.log_start_offset));
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.next_offset));
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.record_count));
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.bytes));
  PutTime(&out, meta.max_event_time);
  coding::PutVarint64(&out, static_cast<uint64_t>(meta.leader_epoch.value()));
  return out;
}

absl::StatusOr<PartitionMeta> DecodePartitionMeta(std::string_view in) {
  PartitionMeta meta;
  uint8_t version = 0;
  int32_t leader_epoch = 0;
  if (!coding::GetByte(&in, &version) || (version != 1 && version != kPartitionMetaVersion) ||
      !GetInt64(&in, &meta.log_start_offset) || !GetInt64(&in, &meta.next_offset) ||
      !GetInt64(&in, &meta.record_count) || !GetInt64(&in, &meta.bytes) ||
      !GetTime(&in, &meta.max_event_time) || (version >= 2 && !GetInt32(&in, &leader_epoch))) {
    return Corrupt("partition metadata");
  }
  meta.leader_epoch = LeaderEpoch(leader_epoch);
  return meta;
}

std::string EncodeProducerState(const ProducerPartitionState& state) {
  std::string out(1, '\x01');
  coding::PutVarint64(&out, static_cast<uint64_t>(static_cast<int64_t>(state.epoch) + 1));
  coding::PutVarint64(&out, static_cast<uint64_t>(static_cast<int64_t>(state.last_sequence) + 1));
  coding::PutVarint64(&out, state.recent.size());
  for (const ProducerBatch& b : state.recent) {
    coding::PutVarint64(&out, static_cast<uint64_t>(b.base_sequence));
    coding::PutVarint64(&out, static_cast<uint64_t>(b.count));
    coding::PutVarint64(&out, static_cast<uint64_t>(b.first_offset));
    coding::PutVarint64(&out, b.positions.size());
    for (const RecordPosition& pos : b.positions) {
      coding::PutVarint64(&out, static_cast<uint64_t>(pos.partition));
      coding::PutVarint64(&out, static_cast<uint64_t>(pos.offset));
    }
  }
  return out;
}

absl::StatusOr<ProducerPartitionState> DecodeProducerState(std::string_view in) {
  ProducerPartitionState state;
  int64_t epoch = 0, last = 0, batches = 0;
  // Both are stored +1 so that -1 (none) encodes as 0; anything outside int32 is corruption,
  // not a value to truncate (found by tests/fuzz/log_codec_fuzz).
  auto in_range = [](int64_t v) { return v >= 0 && v <= int64_t{INT32_MAX} + 1; };
  if (!CheckVersion(&in) || !GetInt64(&in, &epoch) || !GetInt64(&in, &last) ||
      !GetInt64(&in, &batches) || batches < 0 || batches > 1000 || !in_range(epoch) ||
      !in_range(last)) {
    return Corrupt("producer state");
  }
  state.epoch = static_cast<int32_t>(epoch - 1);
  state.last_sequence = static_cast<int32_t>(last - 1);
  for (int64_t i = 0; i < batches; ++i) {
    ProducerBatch b;
    int64_t positions = 0;
    if (!GetInt32(&in, &b.base_sequence) || !GetInt32(&in, &b.count) ||
        !GetInt64(&in, &b.first_offset) || !GetInt64(&in, &positions) || positions < 0 ||
        positions > static_cast<int64_t>(in.size())) {
      return Corrupt("producer state");
    }
    b.positions.resize(positions);
    for (auto& pos : b.positions) {
      if (!GetInt32(&in, &pos.partition) || !GetInt64(&in, &pos.offset)) {
        return Corrupt("producer state");
      }
    }
    state.recent.push_back(std::move(b));
  }
  return state;
}

std::string EncodeProducerInfo(const ProducerInfo& info) {
  std::string out(1, '\x01');
  coding::PutVarint64(&out, static_cast<uint64_t>(info.epoch));
  coding::PutLengthPrefixed(&out, info.name);
  return out;
}

absl::StatusOr<ProducerInfo> DecodeProducerInfo(ProducerId id, std::string_view in) {
  ProducerInfo info;
  info.id = id;
  std::string_view name;
  if (!CheckVersion(&in) || !GetInt32(&in, &info.epoch) || !coding::GetLengthPrefixed(&in, &name)) {
    return Corrupt("producer");
  }
  info.name = std::string(name);
  return info;
}

std::string EncodeDedupEntry(const DedupEntry& entry) {
  std::string out(1, '\x01');
  coding::PutBigEndian32(&out, static_cast<uint32_t>(entry.position.partition));
  coding::PutVarint64(&out, static_cast<uint64_t>(entry.position.offset));
  PutTime(&out, entry.append_time);
  return out;
}

absl::StatusOr<DedupEntry> DecodeDedupEntry(std::string_view in) {
  DedupEntry entry;
  if (!CheckVersion(&in) || in.size() < 4) return Corrupt("dedup entry");
  entry.position.partition = static_cast<int32_t>(coding::ReadBigEndian32(in.data()));
  in.remove_prefix(4);
  if (!GetInt64(&in, &entry.position.offset) || !GetTime(&in, &entry.append_time)) {
    return Corrupt("dedup entry");
  }
  return entry;
}

}  // namespace conduit::log_broker::codec
