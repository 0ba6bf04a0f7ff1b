// RocksDbLogStore: what recovery reads at open — topics, each partition's bookkeeping and
// first/last records, producer states, the leader-epoch cache, dedup entries (rewriting legacy
// ones) and the producer registry.

#include "common/coding/coding.h"
#include "common/status/status_macros.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::log_broker {

using rocksdb_util::ToStatus;

absl::StatusOr<std::vector<TopicMeta>> RocksDbLogStore::LoadTopics() {
  std::vector<TopicMeta> out;
  absl::Status s = ScanMeta(std::string(1, keys::kTopicMetaPrefix),
                            [&](std::string_view, std::string_view value) {
                              auto meta = codec::DecodeTopicMeta(value);
                              if (!meta.ok()) return meta.status();
                              out.push_back(*std::move(meta));
                              return absl::OkStatus();
                            });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<PartitionRecovery> RocksDbLogStore::RecoverPartition(TopicId topic_id,
                                                                    int32_t partition) {
  auto handle = TopicHandle(topic_id);
  if (!handle.ok()) return handle.status();
  PartitionRecovery out;
  std::string value;
  rocksdb::Status got = db_.db()->Get(rocksdb::ReadOptions(), meta_.get(),
                                      keys::PartitionMetaKey(topic_id, partition), &value);
  if (got.ok()) {
    auto meta = codec::DecodePartitionMeta(value);
    if (!meta.ok()) return meta.status();
    out.meta = *meta;
  } else if (!got.IsNotFound()) {
    return ToStatus(got, "read partition metadata");
  }
  const std::string lower = keys::RecordKey(partition, 0);
  const std::string upper = keys::PartitionEndKey(partition);
  rocksdb::Slice lower_slice(lower), upper_slice(upper);
  rocksdb::ReadOptions options;
  options.iterate_lower_bound = &lower_slice;
  options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, handle->get()));
  // The first and last records: the first of the first entry, the last of the last (a chunk
  // holds several).
  auto record_at = [](int64_t offset, std::string_view value, int64_t* at,
                      absl::Time* append_time) -> absl::StatusOr<bool> {
    RecordData ignored;
    int32_t epoch = 0;
    *at = offset;
    CONDUIT_RETURN_IF_ERROR(codec::DecodeRecord(value, append_time, &epoch, &ignored));
    return true;
  };
  it->SeekToLast();
  if (it->Valid()) {
    int64_t last = 0;
    CONDUIT_RETURN_IF_ERROR(codec::ForEachRecordInEntry(
        keys::OffsetOfRecordKey(it->key().ToStringView()), it->value().ToStringView(),
        [&](int64_t offset, std::string_view value) {
          return record_at(offset, value, &last, &out.last_append_time);
        }));
    out.end_offset = last + 1;
    it->SeekToFirst();
    if (it->Valid()) {
      CONDUIT_RETURN_IF_ERROR(codec::ForEachRecordInEntry(
          keys::OffsetOfRecordKey(it->key().ToStringView()), it->value().ToStringView(),
          [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
            CONDUIT_RETURN_IF_ERROR(
                record_at(offset, value, &out.first_offset, &out.first_append_time).status());
            return false;
          }));
    }
  }
  if (!it->status().ok()) return ToStatus(it->status(), "recover partition");
  return out;
}

absl::StatusOr<std::vector<WriteSet::ProducerUpdate>> RocksDbLogStore::LoadProducerStates(
    TopicId topic_id) {
  std::vector<WriteSet::ProducerUpdate> out;
  absl::Status s =
      ScanMeta(keys::TopicScopeKey(keys::kProducerStatePrefix, topic_id),
               [&](std::string_view key, std::string_view value) {
                 const auto parts = keys::ParseProducerStateKey(key);
                 if (!parts) return absl::DataLossError("bad producer key");
                 auto state = codec::DecodeProducerState(value);
                 if (!state.ok()) return state.status();
                 out.push_back(WriteSet::ProducerUpdate{topic_id, parts->partition,
                                                        parts->producer_id, *std::move(state)});
                 return absl::OkStatus();
               });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<WriteSet::EpochStart>> RocksDbLogStore::LoadEpochStarts(
    TopicId topic_id) {
  std::vector<WriteSet::EpochStart> out;
  CONDUIT_RETURN_IF_ERROR(
      ScanMeta(keys::TopicScopeKey(keys::kEpochStartPrefix, topic_id),
               [&](std::string_view key, std::string_view value) -> absl::Status {
                 uint8_t version = 0;
                 uint64_t start = 0;
                 if (key.size() != keys::kEpochStartKeySize || !coding::GetByte(&value, &version) ||
                     version != 1 || !coding::GetVarint64(&value, &start)) {
                   return absl::DataLossError("corrupt leader epoch start");
                 }
                 out.push_back(WriteSet::EpochStart{
                     topic_id, static_cast<int32_t>(coding::ReadBigEndian32(key.data() + 9)),
                     LeaderEpoch(static_cast<int32_t>(coding::ReadBigEndian32(key.data() + 13))),
                     static_cast<int64_t>(start)});
                 return absl::OkStatus();
               }));
  return out;
}

absl::StatusOr<std::vector<WriteSet::DedupPut>> RocksDbLogStore::LoadDedupEntries(
    TopicId topic_id) {
  std::vector<WriteSet::DedupPut> out;
  rocksdb::WriteBatch migrate;  // legacy (topic-keyed) entries, rewritten per partition
  for (char prefix : {keys::kDedupPrefix, keys::kLegacyDedupPrefix}) {
    CONDUIT_RETURN_IF_ERROR(ScanMeta(
        keys::TopicScopeKey(prefix, topic_id),
        [&](std::string_view key, std::string_view value) -> absl::Status {
          const auto event_id = keys::EventIdOfDedupKey(key);
          if (!event_id) return absl::DataLossError("bad dedup key");
          auto entry = codec::DecodeDedupEntry(value);
          if (!entry.ok()) return entry.status();
          out.push_back(WriteSet::DedupPut{topic_id, std::string(*event_id), *entry});
          if (prefix == keys::kLegacyDedupPrefix) {
            const auto put = migrate.Put(
                meta_.get(), keys::DedupKey(topic_id, entry->position.partition, *event_id), value);
            const auto del = migrate.Delete(meta_.get(), key);
            if (!put.ok() || !del.ok()) return ToStatus(put.ok() ? del : put, "dedup");
          }
          return absl::OkStatus();
        }));
  }
  if (migrate.Count() > 0) {
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rocksdb::Status s = db_.db()->Write(sync, &migrate);
    if (!s.ok()) return ToStatus(s, "rewrite legacy dedup entries");
  }
  return out;
}

absl::StatusOr<std::vector<ProducerInfo>> RocksDbLogStore::LoadProducers() {
  std::vector<ProducerInfo> out;
  absl::Status s = ScanMeta(std::string(1, keys::kProducerPrefix),
                            [&](std::string_view key, std::string_view value) {
                              const auto id = keys::ProducerIdOfKey(key);
                              if (!id) return absl::DataLossError("bad producer key");
                              auto info = codec::DecodeProducerInfo(*id, value);
                              if (!info.ok()) return info.status();
                              out.push_back(*std::move(info));
                              return absl::OkStatus();
                            });
  if (!s.ok()) return s;
  return out;
}

}  // namespace conduit::log_broker
