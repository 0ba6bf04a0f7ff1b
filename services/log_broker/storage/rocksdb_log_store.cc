#include "services/log_broker/storage/rocksdb_log_store.h"

#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

namespace conduit::log_broker {

using rocksdb_util::ToStatus;

namespace {

// Keeps the first failure of a WriteBatch's Put and Delete calls in `*s`.
void KeepFirstError(rocksdb::Status* s, const rocksdb::Status& st) {
  if (s->ok()) *s = st;
}

// Adds the WriteSet's changes to the meta column family: partition, producer and dedup state.
void AddMetaWrites(const WriteSet& writes, rocksdb::ColumnFamilyHandle* meta,
                   rocksdb::WriteBatch* batch, rocksdb::Status* s) {
  for (const auto& p : writes.partitions) {
    KeepFirstError(s, batch->Put(meta, keys::PartitionMetaKey(p.topic_id, p.partition),
                                 codec::EncodePartitionMeta(p.meta)));
  }
  for (const auto& p : writes.producers) {
    KeepFirstError(s,
                   batch->Put(meta, keys::ProducerStateKey(p.topic_id, p.partition, p.producer_id),
                              codec::EncodeProducerState(p.state)));
  }
  // Deletes before puts: an id expired and re-appended in the same batch keeps its new entry.
  for (const auto& d : writes.dedup_deletes) {
    KeepFirstError(s, batch->Delete(meta, keys::DedupKey(d.topic_id, d.partition, d.event_id)));
  }
  for (const auto& t : writes.epoch_truncates) {
    KeepFirstError(s, batch->DeleteRange(
                          meta, keys::EpochStartKey(t.topic_id, t.partition, t.from_epoch.value()),
                          keys::EpochStartKey(t.topic_id, t.partition + 1, 0)));
  }
  for (const auto& e : writes.epoch_starts) {
    std::string value(1, '\x01');  // v1: u8 1 | varint first offset
    coding::PutVarint64(&value, static_cast<uint64_t>(e.start_offset));
    KeepFirstError(
        s, batch->Put(meta, keys::EpochStartKey(e.topic_id, e.partition, e.epoch.value()), value));
  }
  for (const auto& d : writes.dedup_puts) {
    KeepFirstError(
        s, batch->Put(meta, keys::DedupKey(d.topic_id, d.entry.position.partition, d.event_id),
                      codec::EncodeDedupEntry(d.entry)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbLogStore>> RocksDbLogStore::Open(
    const std::string& path, const RocksDbLogStoreOptions& options) {
  auto db =
      rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(), rocksdb_util::DefaultCfOptions(),
                         {std::string(keys::kMetaColumnFamily)}, options.file_system);
  if (!db.ok()) return db.status();
  std::unique_ptr<RocksDbLogStore> store(
      new RocksDbLogStore(*std::move(db), path, options.max_chunk_bytes));

  // Attach each topic column family to its metadata; drop orphans left by a crash in the
  // middle of CreateTopic / DeleteTopic.
  auto topics = store->LoadTopics();
  if (!topics.ok()) return topics.status();
  absl::flat_hash_map<TopicId, bool> known;
  for (const auto& t : *topics) known[t.id] = true;
  for (const auto& handle : store->db_.handles()) {
    auto id = keys::TopicIdOfColumnFamily(handle->GetName());
    if (!id) continue;
    if (known.contains(*id)) {
      absl::MutexLock lock(&store->mu_);
      store->topics_[*id] = handle;
    } else {
      rocksdb::Status s = store->db_.db()->DropColumnFamily(handle.get());
      if (!s.ok()) return ToStatus(s, absl::StrCat("drop orphan column family ", handle->GetName()));
    }
  }
  for (const auto& t : *topics) {
    absl::MutexLock lock(&store->mu_);
    if (!store->topics_.contains(t.id)) {
      return absl::DataLossError(absl::StrCat("topic '", t.name, "' has no column family"));
    }
  }
  store->db_.ForgetHandles();
  return store;
}

RocksDbLogStore::RocksDbLogStore(rocksdb_util::OpenDb db, const std::string& path,
                                 int64_t max_chunk_bytes)
    : db_(std::move(db)), space_(path), max_chunk_bytes_(max_chunk_bytes) {
  meta_ = db_.Find(keys::kMetaColumnFamily);
}

RocksDbLogStore::~RocksDbLogStore() {
  {
    absl::MutexLock lock(&mu_);
    topics_.clear();
  }
  meta_.reset();
}

absl::Status RocksDbLogStore::ScanMeta(
    const std::string& prefix,
    const std::function<absl::Status(std::string_view, std::string_view)>& fn) {
  return rocksdb_util::Scan(db_.db(), meta_.get(), prefix, fn, "scan metadata");
}

absl::Status RocksDbLogStore::CreateTopic(const TopicMeta& topic) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  // Column family first, metadata second: a crash in between leaves an orphan to drop.
  auto handle = db_.CreateColumnFamily(keys::TopicColumnFamily(topic.id),
                                       rocksdb_util::DefaultCfOptions());
  if (!handle.ok()) return handle.status();
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::Status s = db_.db()->Put(sync, meta_.get(), keys::TopicMetaKey(topic.id),
                                    codec::EncodeTopicMeta(topic));
  if (!s.ok()) {
    (void)db_.db()->DropColumnFamily(handle->get());
    return ToStatus(s, absl::StrCat("create topic '", topic.name, "'"));
  }
  absl::MutexLock lock(&mu_);
  topics_[topic.id] = *std::move(handle);
  return absl::OkStatus();
}

absl::Status RocksDbLogStore::UpdateTopic(const TopicMeta& topic) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return ToStatus(db_.db()->Put(sync, meta_.get(), keys::TopicMetaKey(topic.id),
                                codec::EncodeTopicMeta(topic)),
                  absl::StrCat("update topic '", topic.name, "'"));
}

absl::Status RocksDbLogStore::DeleteTopic(const TopicMeta& topic) {
  auto handle = TopicHandle(topic.id);
  if (!handle.ok()) return handle.status();
  // Metadata first, column family second: a crash in between leaves an orphan to drop.
  rocksdb::WriteBatch batch;
  rocksdb::Status s = batch.Delete(meta_.get(), keys::TopicMetaKey(topic.id));
  for (char prefix : keys::kTopicScopedPrefixes) {
    if (!s.ok()) break;
    s = batch.DeleteRange(meta_.get(), keys::TopicScopeKey(prefix, topic.id),
                          keys::TopicScopeEnd(prefix, topic.id));
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  if (s.ok()) s = db_.db()->Write(sync, &batch);
  if (!s.ok()) return ToStatus(s, absl::StrCat("delete topic '", topic.name, "'"));
  {
    absl::MutexLock lock(&mu_);
    topics_.erase(topic.id);
  }
  // Readers holding the handle finish on the dropped column family; it is freed after them.
  // The topic is gone once its metadata is: if the drop fails, the orphan column family is
  // dropped at the next Open, so that is not an error of DeleteTopic.
  (void)db_.db()->DropColumnFamily(handle->get());
  return absl::OkStatus();
}

absl::Status RocksDbLogStore::SaveProducer(const ProducerInfo& producer) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return ToStatus(db_.db()->Put(sync, meta_.get(), keys::ProducerKey(producer.id),
                                codec::EncodeProducerInfo(producer)),
                  "save producer");
}

absl::Status RocksDbLogStore::Write(const WriteSet& writes, bool sync) {
  // Only appends are refused for space: retention, compaction and dedup expiry free it.
  if (!writes.records.empty()) CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteBatch batch;
  CONDUIT_RETURN_IF_ERROR(AddRecordWrites(writes, &batch));
  rocksdb::Status s;
  AddMetaWrites(writes, meta_.get(), &batch, &s);
  if (!s.ok()) return ToStatus(s, "build write batch");
  rocksdb::WriteOptions options;
  options.sync = sync;
  return ToStatus(db_.db()->Write(options, &batch), "write records");
}

absl::Status RocksDbLogStore::SyncWal() { return ToStatus(db_.db()->SyncWAL(), "sync wal"); }

absl::Status RocksDbLogStore::CompactTopic(TopicId topic_id) {
  auto handle = TopicHandle(topic_id);
  if (!handle.ok()) return handle.status();
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return ToStatus(db_.db()->CompactRange(options, handle->get(), nullptr, nullptr),
                  "compact topic");
}

int64_t RocksDbLogStore::LiveDataBytes() const {
  uint64_t total = 0;
  (void)db_.db()->GetIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize, &total);
  absl::MutexLock lock(&mu_);
  for (const auto& [id, handle] : topics_) {
    uint64_t cf_bytes = 0;
    if (db_.db()->GetIntProperty(handle.get(), rocksdb::DB::Properties::kLiveSstFilesSize,
                                 &cf_bytes)) {
      total += cf_bytes;
    }
  }
  return static_cast<int64_t>(total);
}

absl::StatusOr<std::vector<StoredRecord>> RocksDbLogStore::Read(TopicId topic_id,
                                                                int32_t partition, int64_t from,
                                                                int64_t end, int32_t max_records,
                                                                int64_t max_bytes) {
  std::vector<StoredRecord> out;
  int64_t bytes = 0;
  CONDUIT_RETURN_IF_ERROR(Scan(
      topic_id, partition, from, end,
      [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
        StoredRecord record;
        record.partition = partition;
        record.offset = offset;
        int32_t leader_epoch = 0;
        CONDUIT_RETURN_IF_ERROR(codec::DecodeRecord(value, &record.append_time, &leader_epoch,
                                                    &record.data, &record.producer));
        record.leader_epoch = LeaderEpoch(leader_epoch);
        const int64_t size = static_cast<int64_t>(record.data.PayloadBytes());
        if (!out.empty() && bytes + size > max_bytes) return false;
        bytes += size;
        out.push_back(std::move(record));
        return static_cast<int32_t>(out.size()) < max_records && bytes < max_bytes;
      }));
  return out;
}

absl::StatusOr<EncodedRecords> RocksDbLogStore::ReadEncoded(TopicId topic_id, int32_t partition,
                                                            int64_t from, int64_t end,
                                                            int32_t max_records,
                                                            int64_t max_bytes) {
  EncodedRecords out;
  CONDUIT_RETURN_IF_ERROR(Scan(
      topic_id, partition, from, end,
      [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
        const int64_t size = static_cast<int64_t>(value.size());
        if (out.count > 0 && out.stored_bytes + size > max_bytes) return false;
        codec::AppendEncodedRecord(offset, value, &out.bytes);
        out.stored_bytes += size;
        ++out.count;
        return out.count < max_records && out.stored_bytes < max_bytes;
      }));
  return out;
}

absl::StatusOr<std::unique_ptr<ReplicaRecords>> RocksDbLogStore::DecodeRecords(
    std::string bytes) {
  auto out = std::make_unique<ReplicaRecords>();
  out->bytes = std::move(bytes);
  int64_t offset = 0;
  std::string_view value;
  // Counted first: one allocation for a fetch's records (a follower takes thousands per fetch).
  size_t count = 0;
  for (std::string_view rest = out->bytes;; ++count) {
    CONDUIT_ASSIGN_OR_RETURN(bool more, codec::NextEncodedRecord(&rest, &offset, &value));
    if (!more) break;
  }
  out->records.reserve(count);
  codec::RecordView view;
  for (std::string_view rest = out->bytes;;) {
    CONDUIT_ASSIGN_OR_RETURN(bool more, codec::NextEncodedRecord(&rest, &offset, &value));
    if (!more) return out;
    CONDUIT_RETURN_IF_ERROR(codec::DecodeRecordView(value, &view));
    out->records.push_back(ReplicaRecord{offset, view.append_time, LeaderEpoch(view.leader_epoch),
                                         view.payload_bytes, view.event_time, view.event_id,
                                         view.producer, value, nullptr});
  }
}

absl::StatusOr<rocksdb_util::OpenDb::Handle> RocksDbLogStore::TopicHandle(TopicId topic_id) const {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic_id);
  if (it == topics_.end()) {
    return absl::NotFoundError(absl::StrCat("topic id ", topic_id.value(), " has no records store"));
  }
  return it->second;
}

}  // namespace conduit::log_broker
