#include "services/log_broker/storage/rocksdb_log_store.h"

#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

namespace conduit::log_broker {

using rocksdb_util::ToStatus;

absl::StatusOr<std::unique_ptr<RocksDbLogStore>> RocksDbLogStore::Open(const std::string& path) {
  auto db = rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(),
                               rocksdb_util::DefaultCfOptions(),
                               {std::string(keys::kMetaColumnFamily)});
  if (!db.ok()) return db.status();
  std::unique_ptr<RocksDbLogStore> store(new RocksDbLogStore(*std::move(db)));

  // Attach each topic column family to its metadata; drop orphans left by a crash in the
  // middle of CreateTopic / DeleteTopic.
  auto topics = store->LoadTopics();
  if (!topics.ok()) return topics.status();
  absl::flat_hash_map<uint64_t, bool> known;
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

RocksDbLogStore::RocksDbLogStore(rocksdb_util::OpenDb db) : db_(std::move(db)) {
  meta_ = db_.Find(keys::kMetaColumnFamily);
}

RocksDbLogStore::~RocksDbLogStore() {
  {
    absl::MutexLock lock(&mu_);
    topics_.clear();
  }
  meta_.reset();
}

absl::StatusOr<std::vector<TopicMeta>> RocksDbLogStore::LoadTopics() {
  std::vector<TopicMeta> out;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(rocksdb::ReadOptions(), meta_.get()));
  const std::string prefix(1, keys::kTopicMetaPrefix);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    auto meta = codec::DecodeTopicMeta(it->value().ToStringView());
    if (!meta.ok()) return meta.status();
    out.push_back(*std::move(meta));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load topics");
  return out;
}

absl::StatusOr<PartitionExtent> RocksDbLogStore::RecoverPartition(uint64_t topic_id,
                                                                  int32_t partition) {
  auto handle = TopicHandle(topic_id);
  if (!handle.ok()) return handle.status();
  const std::string lower = keys::RecordKey(partition, 0);
  const std::string upper = keys::PartitionEndKey(partition);
  rocksdb::Slice lower_slice(lower), upper_slice(upper);
  rocksdb::ReadOptions options;
  options.iterate_lower_bound = &lower_slice;
  options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, handle->get()));
  PartitionExtent extent;
  it->SeekToLast();
  if (it->Valid()) {
    extent.next_offset = keys::OffsetOfRecordKey(it->key().ToStringView()) + 1;
    RecordData ignored;
    if (auto s = codec::DecodeRecord(it->value().ToStringView(), &extent.last_append_time, &ignored);
        !s.ok()) {
      return s;
    }
    it->SeekToFirst();
    if (it->Valid()) extent.log_start_offset = keys::OffsetOfRecordKey(it->key().ToStringView());
  }
  if (!it->status().ok()) return ToStatus(it->status(), "recover partition");
  return extent;
}

absl::Status RocksDbLogStore::CreateTopic(const TopicMeta& topic) {
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

absl::Status RocksDbLogStore::DeleteTopic(const TopicMeta& topic) {
  auto handle = TopicHandle(topic.id);
  if (!handle.ok()) return handle.status();
  // Metadata first, column family second: a crash in between leaves an orphan to drop.
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::Status s = db_.db()->Delete(sync, meta_.get(), keys::TopicMetaKey(topic.id));
  if (!s.ok()) return ToStatus(s, absl::StrCat("delete topic '", topic.name, "'"));
  {
    absl::MutexLock lock(&mu_);
    topics_.erase(topic.id);
  }
  // Readers holding the handle finish on the dropped column family; it is freed after them.
  s = db_.db()->DropColumnFamily(handle->get());
  return ToStatus(s, absl::StrCat("drop records of topic '", topic.name, "'"));
}

absl::Status RocksDbLogStore::Append(const std::vector<AppendEntry>& entries, bool sync) {
  rocksdb::WriteBatch batch;
  std::string value;
  uint64_t cached_id = 0;
  rocksdb_util::OpenDb::Handle cached;
  for (const AppendEntry& e : entries) {
    if (!cached || e.topic_id != cached_id) {
      auto handle = TopicHandle(e.topic_id);
      if (!handle.ok()) return handle.status();
      cached = *std::move(handle);
      cached_id = e.topic_id;
    }
    codec::EncodeRecord(*e.data, e.append_time, &value);
    rocksdb::Status s = batch.Put(cached.get(), keys::RecordKey(e.partition, e.offset), value);
    if (!s.ok()) return ToStatus(s, "build write batch");
  }
  rocksdb::WriteOptions options;
  options.sync = sync;
  return ToStatus(db_.db()->Write(options, &batch), "append records");
}

absl::Status RocksDbLogStore::SyncWal() { return ToStatus(db_.db()->SyncWAL(), "sync wal"); }

absl::StatusOr<std::vector<StoredRecord>> RocksDbLogStore::Read(uint64_t topic_id,
                                                                int32_t partition, int64_t from,
                                                                int64_t end, int32_t max_records,
                                                                int64_t max_bytes) {
  std::vector<StoredRecord> out;
  if (from >= end) return out;
  auto handle = TopicHandle(topic_id);
  if (!handle.ok()) return handle.status();
  const std::string upper = keys::RecordKey(partition, end);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions options;
  options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, handle->get()));
  int64_t bytes = 0;
  for (it->Seek(keys::RecordKey(partition, from));
       it->Valid() && static_cast<int32_t>(out.size()) < max_records && (out.empty() || bytes < max_bytes);
       it->Next()) {
    StoredRecord record;
    record.partition = partition;
    record.offset = keys::OffsetOfRecordKey(it->key().ToStringView());
    if (auto s = codec::DecodeRecord(it->value().ToStringView(), &record.append_time, &record.data);
        !s.ok()) {
      return s;
    }
    const int64_t size = static_cast<int64_t>(record.data.PayloadBytes());
    if (!out.empty() && bytes + size > max_bytes) break;
    bytes += size;
    out.push_back(std::move(record));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "read records");
  return out;
}

absl::StatusOr<rocksdb_util::OpenDb::Handle> RocksDbLogStore::TopicHandle(uint64_t topic_id) const {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(topic_id);
  if (it == topics_.end()) {
    return absl::NotFoundError(absl::StrCat("topic id ", topic_id, " has no records store"));
  }
  return it->second;
}

}  // namespace conduit::log_broker
