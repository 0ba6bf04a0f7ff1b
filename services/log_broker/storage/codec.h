#pragma once

#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker::codec {

// Record value, format version 2 (version 1 has no leader epoch; read as epoch 0):
//   u8 version=2 | u8 flags (1 key, 2 value, 4 event time) | BE64 append time (µs since epoch)
//   | BE32 leader epoch | [BE64 event time µs] | [varint len + key] | [varint len + value]
//   | varint len + event id | varint header count | (varint len + key, varint len + value)*
// Record v3 adds the producer batch (flag 8: BE64 producer id, BE32 epoch, BE32 base sequence,
// varint count, varint index) after the leader epoch; v1 and v2 are still read.
void EncodeRecord(const RecordData& data, absl::Time append_time, int32_t leader_epoch,
                  std::string* out, const ProducerTag* producer = nullptr);
// DATA_LOSS when the bytes are not a valid record.
absl::Status DecodeRecord(std::string_view in, absl::Time* append_time, int32_t* leader_epoch,
                          RecordData* data, std::optional<ProducerTag>* producer = nullptr);

// A record value's fields as views into its bytes, nothing copied: for a caller that only
// looks at them (a follower's bookkeeping of records it appends as they are). Each header is
// handed to `header`; payload_bytes counts them as RecordData::PayloadBytes does.
struct RecordView {
  absl::Time append_time;
  int32_t leader_epoch = 0;
  std::optional<ProducerTag> producer;
  std::optional<absl::Time> event_time;
  std::optional<std::string_view> key;
  std::optional<std::string_view> value;
  std::string_view event_id;
  int64_t payload_bytes = 0;
};
absl::Status DecodeRecordView(
    std::string_view in, RecordView* out,
    absl::FunctionRef<void(std::string_view key, std::string_view value)> header =
        [](std::string_view, std::string_view) {});

// Records as LogStore::ReadEncoded ships them to a follower (ReplicaFetch): per record a varint
// offset, then the record value above, varint length-prefixed.
void AppendEncodedRecord(int64_t offset, std::string_view value, std::string* out);
// Takes the next record off the front of `in`: false once `in` is empty, DATA_LOSS when it is
// cut short. `value` points into `in`'s bytes.
absl::StatusOr<bool> NextEncodedRecord(std::string_view* in, int64_t* offset,
                                       std::string_view* value);

// A record entry, the value under RecordKey(partition, offset), is one of:
//   - a single record (the record value above) at the key's offset — how records were stored
//     before chunks, still read;
//   - a chunk: records appended together, from the key's offset on:
//       u8 0xC0 | (varint offset, varint len + record value)*   with offsets rising
//     (the first record's offset is the key's; compaction may leave holes after it).
// One RocksDB entry per chunk instead of per record: one memtable insert, one WAL record and one
// key per chunk (see the README's storage section).
inline constexpr char kChunkMarker = '\xC0';
inline bool IsChunk(std::string_view entry) { return !entry.empty() && entry[0] == kChunkMarker; }
// Starts an empty chunk in *out (replacing its contents); AppendEncodedRecord adds records.
inline void StartChunk(std::string* out) { out->assign(1, kChunkMarker); }
// Calls fn(offset, record value) for each record of the entry stored under `key_offset`, in
// offset order, until fn returns false or an error (returned). DATA_LOSS for a corrupt chunk.
absl::Status ForEachRecordInEntry(
    int64_t key_offset, std::string_view entry,
    absl::FunctionRef<absl::StatusOr<bool>(int64_t offset, std::string_view value)> fn);

// Topic metadata, format version 2 (version 1 stops after `created`):
//   u8 version=2 | BE64 id | varint len + name | varint partitions | u8 durability
//   | varint flush interval µs | varint max record bytes | BE64 created µs
//   | BE64 retention time µs (-1: forever) | BE64 retention bytes (-1: none) | u8 cleanup policy
//   | varint tombstone retention µs | varint dedup window µs
std::string EncodeTopicMeta(const TopicMeta& meta);
absl::StatusOr<TopicMeta> DecodeTopicMeta(std::string_view in);

// Partition bookkeeping v2: u8 2 | varint log start | varint next offset | varint record count
//   | varint bytes | BE64 max event time µs (INT64_MIN: none) | varint leader epoch of the last
//   append (v1 stops before it: epoch 0)
std::string EncodePartitionMeta(const PartitionMeta& meta);
absl::StatusOr<PartitionMeta> DecodePartitionMeta(std::string_view in);

// Producer state in a partition v1: u8 1 | varint epoch+1 | varint last sequence+1
//   | varint batch count | (varint base seq | varint count | varint first offset
//   | varint positions count | (varint partition | varint offset)*)*
std::string EncodeProducerState(const ProducerPartitionState& state);
absl::StatusOr<ProducerPartitionState> DecodeProducerState(std::string_view in);

// Producer registry entry v1: u8 1 | varint epoch | varint len + name
std::string EncodeProducerInfo(const ProducerInfo& info);
absl::StatusOr<ProducerInfo> DecodeProducerInfo(ProducerId id, std::string_view in);

// Dedup entry v1: u8 1 | BE32 partition | varint offset | BE64 append time µs
std::string EncodeDedupEntry(const DedupEntry& entry);
absl::StatusOr<DedupEntry> DecodeDedupEntry(std::string_view in);

}  // namespace conduit::log_broker::codec
