// RocksDbLogStore: record entries. Appends are packed into chunks (one RocksDB entry per run
// of a partition's records in a Write), deletes that cut into a chunk rewrite what it keeps,
// and reads open chunks. The entry format is in codec.h.

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::log_broker {

using rocksdb_util::ToStatus;

namespace {

// What one Write deletes in one partition.
struct PartitionDeletes {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [from, to)
  absl::flat_hash_set<int64_t> offsets;

  bool Covers(int64_t offset) const {
    for (const auto& [from, to] : ranges) {
      if (offset >= from && offset < to) return true;
    }
    return offsets.contains(offset);
  }
  // Offsets at which an entry holding deleted records and others may start at or before:
  // each range's ends and each deleted offset.
  std::set<int64_t> Probes() const {
    std::set<int64_t> out(offsets.begin(), offsets.end());
    for (const auto& [from, to] : ranges) {
      if (from >= to) continue;
      out.insert(from);
      out.insert(to - 1);
    }
    return out;
  }
};

// An iterator over one partition's record entries.
class PartitionIterator {
 public:
  PartitionIterator(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, int32_t partition,
                    int64_t end)
      : lower_(keys::RecordKey(partition, 0)),
        upper_(end == INT64_MAX ? keys::PartitionEndKey(partition)
                                : keys::RecordKey(partition, end)),
        lower_slice_(lower_),
        upper_slice_(upper_) {
    rocksdb::ReadOptions options;
    options.iterate_lower_bound = &lower_slice_;
    options.iterate_upper_bound = &upper_slice_;
    it_.reset(db->NewIterator(options, cf));
  }
  rocksdb::Iterator* operator->() { return it_.get(); }
  int64_t key_offset() const { return keys::OffsetOfRecordKey(it_->key().ToStringView()); }

 private:
  const std::string lower_, upper_;
  const rocksdb::Slice lower_slice_, upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

}  // namespace

absl::Status RocksDbLogStore::AddRecordWrites(const WriteSet& writes, rocksdb::WriteBatch* batch) {
  absl::flat_hash_map<TopicId, rocksdb_util::OpenDb::Handle> handles;
  auto cf_of = [&](TopicId topic_id) -> absl::StatusOr<rocksdb::ColumnFamilyHandle*> {
    auto it = handles.find(topic_id);
    if (it == handles.end()) {
      CONDUIT_ASSIGN_OR_RETURN(auto handle, TopicHandle(topic_id));
      it = handles.emplace(topic_id, std::move(handle)).first;
    }
    return it->second.get();
  };
  rocksdb::Status s;
  auto check = [&](const rocksdb::Status& st) {
    if (s.ok()) s = st;
  };

  // Deletes. Whole entries go by key (DeleteRange, Delete); a chunk that holds deleted records
  // and others is rewritten with the others, under the offset of the first one it keeps. The
  // rewrites come after every delete of the partition in the batch, so they win.
  std::map<std::pair<TopicId, int32_t>, PartitionDeletes> deletes;
  for (const auto& d : writes.range_deletes) {
    deletes[{d.topic_id, d.partition}].ranges.emplace_back(d.from, d.to);
  }
  for (const auto& d : writes.record_deletes) {
    deletes[{d.topic_id, d.partition}].offsets.insert(d.offset);
  }
  std::string kept;
  for (const auto& partition_deletes : deletes) {
    const auto [topic_id, partition] = partition_deletes.first;
    const PartitionDeletes& d = partition_deletes.second;
    CONDUIT_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * cf, cf_of(topic_id));
    for (const auto& [from, to] : d.ranges) {
      check(
          batch->DeleteRange(cf, keys::RecordKey(partition, from), keys::RecordKey(partition, to)));
    }
    for (int64_t offset : d.offsets) check(batch->Delete(cf, keys::RecordKey(partition, offset)));
    PartitionIterator it(db_.db(), cf, partition, INT64_MAX);
    absl::flat_hash_set<int64_t> rewritten;  // entries (by key offset) already looked at
    for (int64_t probe : d.Probes()) {
      it->SeekForPrev(keys::RecordKey(partition, probe));
      if (!it->Valid()) {
        // An error must not pass for "no entry": the range's delete would drop a chunk whose
        // kept records are then never rewritten.
        if (!it->status().ok()) return ToStatus(it->status(), "read records to delete");
        continue;
      }
      const int64_t key_offset = it.key_offset();
      const std::string_view entry = it->value().ToStringView();
      if (!codec::IsChunk(entry) || !rewritten.insert(key_offset).second) continue;
      int64_t first_kept = -1;
      int removed = 0;
      CONDUIT_RETURN_IF_ERROR(codec::ForEachRecordInEntry(
          key_offset, entry, [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
            if (d.Covers(offset)) {
              ++removed;
            } else {
              if (first_kept < 0) {
                first_kept = offset;
                codec::StartChunk(&kept);
              }
              codec::AppendEncodedRecord(offset, value, &kept);
            }
            return true;
          }));
      if (removed == 0) continue;
      if (first_kept != key_offset) {
        check(batch->Delete(cf, keys::RecordKey(partition, key_offset)));
      }
      if (first_kept >= 0) check(batch->Put(cf, keys::RecordKey(partition, first_kept), kept));
    }
    if (!it->status().ok()) return ToStatus(it->status(), "read records to delete");
  }

  // Appends: each partition's records of this Write in offset order, in chunks of up to
  // max_chunk_bytes_.
  std::vector<const AppendEntry*> appends;
  appends.reserve(writes.records.size());
  for (const AppendEntry& e : writes.records) appends.push_back(&e);
  std::stable_sort(appends.begin(), appends.end(), [](const AppendEntry* a, const AppendEntry* b) {
    return std::make_pair(a->topic_id, a->partition) < std::make_pair(b->topic_id, b->partition);
  });
  std::string chunk, value;
  for (size_t i = 0; i < appends.size();) {
    const AppendEntry& first = *appends[i];
    CONDUIT_ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * cf, cf_of(first.topic_id));
    int64_t chunk_start = first.offset;
    codec::StartChunk(&chunk);
    size_t j = i;
    for (; j < appends.size() && appends[j]->topic_id == first.topic_id &&
           appends[j]->partition == first.partition;
         ++j) {
      const AppendEntry& e = *appends[j];
      if (static_cast<int64_t>(chunk.size()) >= max_chunk_bytes_) {
        check(batch->Put(cf, keys::RecordKey(first.partition, chunk_start), chunk));
        chunk_start = e.offset;
        codec::StartChunk(&chunk);
      }
      if (j > i && e.offset <= appends[j - 1]->offset) {
        // The domain assigns each partition's offsets in order; a chunk out of order could not
        // be read back, so refuse the write rather than store it.
        return absl::InternalError(absl::StrCat("appends to partition ", e.partition,
                                                " out of offset order: ", e.offset, " after ",
                                                appends[j - 1]->offset));
      }
      std::string_view stored = e.stored;
      if (stored.empty()) {
        codec::EncodeRecord(*e.data, e.append_time, e.leader_epoch.value(), &value,
                            e.producer ? &*e.producer : nullptr);
        stored = value;
      }
      codec::AppendEncodedRecord(e.offset, stored, &chunk);
    }
    check(batch->Put(cf, keys::RecordKey(first.partition, chunk_start), chunk));
    i = j;
  }
  return ToStatus(s, "build write batch");
}

absl::Status RocksDbLogStore::Scan(
    TopicId topic_id, int32_t partition, int64_t from, int64_t end,
    absl::FunctionRef<absl::StatusOr<bool>(int64_t offset, std::string_view value)> take) {
  from = std::max<int64_t>(from, 0);  // a negative offset's key would sort after every record
  if (from >= end) return absl::OkStatus();
  CONDUIT_ASSIGN_OR_RETURN(auto handle, TopicHandle(topic_id));
  PartitionIterator it(db_.db(), handle.get(), partition, end);
  // The entry holding `from` may be a chunk that starts before it.
  it->SeekForPrev(keys::RecordKey(partition, from));
  if (!it->Valid()) {
    if (!it->status().ok()) return ToStatus(it->status(), "read records");
    it->Seek(keys::RecordKey(partition, from));
  }
  bool more = true;
  for (; more && it->Valid(); it->Next()) {
    CONDUIT_RETURN_IF_ERROR(codec::ForEachRecordInEntry(
        it.key_offset(), it->value().ToStringView(),
        [&](int64_t offset, std::string_view value) -> absl::StatusOr<bool> {
          if (offset < from) return true;
          if (offset >= end) {
            more = false;
            return false;
          }
          CONDUIT_ASSIGN_OR_RETURN(more, take(offset, value));
          return more;
        }));
  }
  return ToStatus(it->status(), "read records");
}

}  // namespace conduit::log_broker
