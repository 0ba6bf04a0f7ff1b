#pragma once

// A replica's contents, so that copies can be compared record by record: one partition read
// from a broker's data dir with the broker's own storage layer (RocksDbLogStore), and a checksum
// of (offset, key, value) over an offset range. A follower refuses Fetch (not the leader), so
// every copy — leader's or follower's — is read this way, with no API added for it.
//
// Read only the data dir of a broker that has exited: RocksDB locks it (Open fails while the
// broker runs), and Open runs the recovery the broker itself runs when it starts again (WAL
// replay; orphan column families dropped), so the copy read is the one the broker would serve.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "conduit/log/v1/log.pb.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::testing {

// FNV-1a (64 bit) over each record's offset, key and value, in the order added; an absent key
// or value and an empty one differ. Equal checksums over a range: the same records at the same
// offsets (a hole, a duplicate or a record out of place changes it).
class RecordsChecksum {
 public:
  void Add(int64_t offset, const std::optional<std::string>& key,
           const std::optional<std::string>& value) {
    Mix(&offset, sizeof(offset));
    MixField(key);
    MixField(value);
    ++records_;
  }
  void Add(const ::conduit::log::v1::Record& r) {
    Add(r.offset(), r.has_key() ? std::optional<std::string>(r.key()) : std::nullopt,
        r.has_value() ? std::optional<std::string>(r.value()) : std::nullopt);
  }
  void Add(const log_broker::StoredRecord& r) { Add(r.offset, r.data.key, r.data.value); }

  uint64_t value() const { return hash_; }
  int64_t records() const { return records_; }

 private:
  void Mix(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ULL;
  }
  void MixField(const std::optional<std::string>& field) {
    const int64_t size = field ? static_cast<int64_t>(field->size()) : -1;
    Mix(&size, sizeof(size));
    if (field) Mix(field->data(), field->size());
  }

  uint64_t hash_ = 0xcbf29ce484222325ULL;
  int64_t records_ = 0;
};

// One partition of one broker's copy: its records with offsets in [0, end), in offset order.
struct StoredPartition {
  std::vector<log_broker::StoredRecord> records;
  int64_t log_end_offset = 0;  // the copy's own end (its bookkeeping), may be past `end`
  uint64_t checksum = 0;       // RecordsChecksum of `records`
};

// Opens the store under a stopped broker's `data_dir` (the broker's --data-dir) and reads
// partition `partition` of `topic` over [0, end). NOT_FOUND when the copy has no such topic;
// the store's error when it cannot be opened (e.g. the broker still runs).
inline absl::StatusOr<StoredPartition> ReadStoredPartition(const std::string& data_dir,
                                                           const std::string& topic,
                                                           int32_t partition, int64_t end) {
  auto store = log_broker::RocksDbLogStore::Open(data_dir + "/broker");
  if (!store.ok()) return store.status();
  auto topics = (*store)->LoadTopics();
  if (!topics.ok()) return topics.status();
  const log_broker::TopicMeta* meta = nullptr;
  for (const auto& t : *topics) {
    if (t.name == topic) meta = &t;
  }
  if (meta == nullptr) {
    return absl::NotFoundError(absl::StrCat("no topic '", topic, "' in ", data_dir));
  }
  StoredPartition out;
  auto recovered = (*store)->RecoverPartition(meta->id, partition);
  if (!recovered.ok()) return recovered.status();
  if (recovered->meta) out.log_end_offset = recovered->meta->next_offset;
  RecordsChecksum checksum;
  for (int64_t from = 0; from < end;) {
    auto records = (*store)->Read(meta->id, partition, from, end, 10000, int64_t{64} << 20);
    if (!records.ok()) return records.status();
    if (records->empty()) break;
    from = records->back().offset + 1;
    for (auto& r : *records) {
      checksum.Add(r);
      out.records.push_back(std::move(r));
    }
  }
  out.checksum = checksum.value();
  return out;
}

}  // namespace conduit::testing
