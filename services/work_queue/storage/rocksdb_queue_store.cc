#include "services/work_queue/storage/rocksdb_queue_store.h"

#include <rocksdb/write_batch.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/work_queue/storage/codec.h"
#include "services/work_queue/storage/key_schema.h"

namespace conduit::work_queue {

using rocksdb_util::ToStatus;

absl::StatusOr<std::unique_ptr<RocksDbQueueStore>> RocksDbQueueStore::Open(
    const std::string& path, const RocksDbQueueStoreOptions& options) {
  std::vector<std::string> cfs(keys::kColumnFamilies.begin(), keys::kColumnFamilies.end());
  // Index entries and leases are read only by the recovery scan at open (JobQueue::Recover): while
  // serving they are only written, and an ack's lease delete sorts just before that lease's put.
  const rocksdb_util::CfOptionsByName write_mostly = {
      {keys::kJobIndexCf, rocksdb_util::WriteMostlyCfOptions()},
      {keys::kLeasesCf, rocksdb_util::WriteMostlyCfOptions()}};
  auto db = rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(),
                               rocksdb_util::DefaultCfOptions(keys::kQueueKeySize), cfs,
                               options.file_system, write_mostly);
  if (!db.ok()) return db.status();
  std::unique_ptr<RocksDbQueueStore> store(new RocksDbQueueStore(*std::move(db), path));
  CONDUIT_RETURN_IF_ERROR(store->MoveLegacyNextJobId());
  CONDUIT_RETURN_IF_ERROR(store->IndexLegacyJobs());
  return store;
}

absl::Status RocksDbQueueStore::MoveLegacyNextJobId() {
  std::string value;
  rocksdb::Status s =
      db_.db()->Get(rocksdb::ReadOptions(), queues_.get(), keys::kLegacyNextJobIdKey, &value);
  if (s.IsNotFound()) return absl::OkStatus();
  if (!s.ok()) return ToStatus(s, "load next job id");
  rocksdb::WriteBatch batch;
  s = batch.Put(counters_.get(), keys::kNextJobIdKey, value);
  if (s.ok()) s = batch.Delete(queues_.get(), keys::kLegacyNextJobIdKey);
  rocksdb::WriteOptions sync;
  sync.sync = true;
  if (s.ok()) s = db_.db()->Write(sync, &batch);
  return ToStatus(s, "move next job id to the counters column family");
}

absl::Status RocksDbQueueStore::IndexLegacyJobs() {
  std::string marker;
  rocksdb::Status got =
      db_.db()->Get(rocksdb::ReadOptions(), counters_.get(), keys::kJobIndexBuiltKey, &marker);
  if (got.ok()) return absl::OkStatus();
  if (!got.IsNotFound()) return ToStatus(got, "read the job index marker");
  // A store written before the job index: every job gets its index entry, and a leased job
  // (leased in its record) gets its lease record and goes back to its queued record. Written in
  // chunks; each step can be repeated, so a crash midway is finished at the next open, and the
  // marker goes last.
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::WriteBatch batch;
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(rocksdb::ReadOptions(), jobs_.get()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::optional<uint64_t> id = keys::JobIdOfKey(it->key().ToStringView());
    if (!id) return absl::DataLossError("corrupt job key");
    CONDUIT_ASSIGN_OR_RETURN(Job job, codec::DecodeJob(*id, it->value().ToStringView()));
    rocksdb::Status s;
    if (job.state == JobState::kLeased && !job.attempts.empty()) {
      s = batch.Put(leases_.get(), it->key(), codec::EncodeLease(LeaseRecord::Of(job)));
      job.state = JobState::kQueued;
      job.attempts.pop_back();
      job.lease_token = LeaseToken();
      if (s.ok()) s = batch.Put(jobs_.get(), it->key(), codec::EncodeJob(job));
    }
    if (s.ok()) {
      s = batch.Put(job_index_.get(), it->key(), codec::EncodeIndexEntry(JobIndexEntry::Of(job)));
    }
    if (s.ok() && batch.Count() >= 10'000) {
      s = db_.db()->Write(sync, &batch);
      batch.Clear();
    }
    if (!s.ok()) return ToStatus(s, "index legacy jobs");
  }
  if (!it->status().ok()) return ToStatus(it->status(), "index legacy jobs");
  rocksdb::Status s = batch.Put(counters_.get(), keys::kJobIndexBuiltKey, "1");
  if (s.ok()) s = db_.db()->Write(sync, &batch);
  return ToStatus(s, "index legacy jobs");
}

RocksDbQueueStore::RocksDbQueueStore(rocksdb_util::OpenDb db, const std::string& path)
    // Audit entries of one queue and microsecond are told apart by this sequence. RocksDB's
    // own sequence number has advanced by at least one for every audit entry written before
    // this open, so starting from it never reuses a key (and needs no wall clock).
    : db_(std::move(db)), space_(path), audit_seq_(db_.db()->GetLatestSequenceNumber() + 1) {
  queues_ = db_.Find(keys::kQueuesCf);
  jobs_ = db_.Find(keys::kJobsCf);
  idempotency_ = db_.Find(keys::kIdempotencyCf);
  audit_ = db_.Find(keys::kAuditCf);
  counters_ = db_.Find(keys::kCountersCf);
  bridges_ = db_.Find(keys::kBridgesCf);
  job_index_ = db_.Find(keys::kJobIndexCf);
  leases_ = db_.Find(keys::kLeasesCf);
  db_.ForgetHandles();
}

absl::StatusOr<std::vector<QueueMeta>> RocksDbQueueStore::LoadQueues() {
  std::vector<QueueMeta> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), queues_.get()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!keys::IsQueueKey(it->key().ToStringView())) {
      return absl::DataLossError("unexpected key in the queues column family");
    }
    auto q = codec::DecodeQueue(it->value().ToStringView());
    if (!q.ok()) return q.status();
    out.push_back(*std::move(q));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load queues");
  return out;
}

absl::StatusOr<std::vector<BridgeSpec>> RocksDbQueueStore::LoadBridges() {
  std::vector<BridgeSpec> out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), bridges_.get()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    CONDUIT_ASSIGN_OR_RETURN(BridgeSpec spec, codec::DecodeBridge(it->value().ToStringView()));
    if (spec.name != it->key().ToStringView()) {
      return absl::DataLossError("bridge record under another name's key");
    }
    out.push_back(std::move(spec));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load bridges");
  return out;
}

absl::Status RocksDbQueueStore::PutBridge(const BridgeSpec& spec) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return ToStatus(db_.db()->Put(sync, bridges_.get(), spec.name, codec::EncodeBridge(spec)),
                  "write bridge");
}

absl::Status RocksDbQueueStore::DeleteBridge(const std::string& name) {
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return ToStatus(db_.db()->Delete(sync, bridges_.get(), name), "delete bridge");
}

absl::StatusOr<uint64_t> RocksDbQueueStore::LoadNextJobId() {
  std::string value;
  rocksdb::Status s =
      db_.db()->Get(rocksdb::ReadOptions(), counters_.get(), keys::kNextJobIdKey, &value);
  if (s.IsNotFound()) return 0;
  if (!s.ok()) return ToStatus(s, "load next job id");
  return codec::DecodeCounter(value);
}

absl::Status RocksDbQueueStore::ScanIndex(
    QueueId queue_id, const std::function<absl::Status(const JobIndexEntry&)>& fn) {
  const std::string prefix = keys::QueueKey(queue_id);
  rocksdb::ReadOptions options;
  options.fill_cache = false;  // one pass over every job: do not evict what serving needs
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, job_index_.get()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<uint64_t> id = keys::JobIdOfKey(it->key().ToStringView());
    if (!id) return absl::DataLossError("corrupt job index key");
    CONDUIT_ASSIGN_OR_RETURN(JobIndexEntry entry,
                             codec::DecodeIndexEntry(*id, it->value().ToStringView()));
    CONDUIT_RETURN_IF_ERROR(fn(entry));
  }
  return ToStatus(it->status(), "scan job index");
}

absl::StatusOr<std::vector<LeaseRecord>> RocksDbQueueStore::LoadLeases(QueueId queue_id) {
  std::vector<LeaseRecord> out;
  const std::string prefix = keys::QueueKey(queue_id);
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), leases_.get()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<uint64_t> id = keys::JobIdOfKey(it->key().ToStringView());
    if (!id) return absl::DataLossError("corrupt lease key");
    CONDUIT_ASSIGN_OR_RETURN(LeaseRecord lease,
                             codec::DecodeLease(*id, it->value().ToStringView()));
    out.push_back(std::move(lease));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load leases");
  return out;
}

absl::StatusOr<std::vector<std::optional<Job>>> RocksDbQueueStore::ReadJobs(
    QueueId queue_id, const std::vector<uint64_t>& ids) {
  std::vector<std::optional<Job>> out(ids.size());
  if (ids.empty()) return out;
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  const uint64_t first = ids[order.front()], last = ids[order.back()];
  auto decode = [&](size_t i, std::string_view value) -> absl::Status {
    CONDUIT_ASSIGN_OR_RETURN(out[i], codec::DecodeJob(ids[i], value));
    return absl::OkStatus();
  };
  // Several ids close together (a lease takes the oldest ready jobs, mostly consecutive) are
  // read with one iterator: a Seek, then Next while the next stored job is the next wanted one.
  // That is a fraction of a point lookup per job, each of which searches every memtable and
  // level anew; for a few ids, making the iterator costs more than it saves.
  constexpr size_t kMinIteratorIds = 8;
  if (ids.size() >= kMinIteratorIds && last - first < 2 * ids.size()) {
    const std::string upper = keys::JobKey(queue_id, last + 1);
    const rocksdb::Slice upper_slice(upper);
    rocksdb::ReadOptions options;
    // Consecutive records are read by a lease (each ready record once) and by a restart:
    // caching their blocks would only evict blocks that are read again, and cost an allocation
    // per block.
    options.fill_cache = false;
    options.iterate_upper_bound = last == UINT64_MAX ? nullptr : &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator(options, jobs_.get()));
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t i = order[k];
      if (k > 0 && ids[i] == ids[order[k - 1]]) {
        out[i] = out[order[k - 1]];
        continue;
      }
      const std::string key = keys::JobKey(queue_id, ids[i]);
      if (k == 0 || !it->Valid() || it->key().compare(key) < 0) it->Seek(key);
      if (!it->Valid()) {
        if (!it->status().ok()) return ToStatus(it->status(), "read jobs");
        continue;
      }
      if (it->key() != rocksdb::Slice(key)) continue;  // not stored: the iterator is past it
      CONDUIT_RETURN_IF_ERROR(decode(i, it->value().ToStringView()));
      it->Next();
    }
    if (!it->status().ok()) return ToStatus(it->status(), "read jobs");
    return out;
  }
  std::vector<std::string> key_bytes;
  key_bytes.reserve(ids.size());
  for (uint64_t id : ids) key_bytes.push_back(keys::JobKey(queue_id, id));
  std::vector<rocksdb::Slice> key_slices(key_bytes.begin(), key_bytes.end());
  std::vector<rocksdb::PinnableSlice> values(ids.size());
  std::vector<rocksdb::Status> statuses(ids.size());
  db_.db()->MultiGet(rocksdb::ReadOptions(), jobs_.get(), key_slices.size(), key_slices.data(),
                     values.data(), statuses.data());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) return ToStatus(statuses[i], "read jobs");
    CONDUIT_RETURN_IF_ERROR(decode(i, values[i].ToStringView()));
  }
  return out;
}

absl::StatusOr<std::vector<QueueWrite::KeyEntry>> RocksDbQueueStore::LoadKeys(QueueId queue_id) {
  std::vector<QueueWrite::KeyEntry> out;
  const std::string prefix = keys::QueueKey(queue_id);
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), idempotency_.get()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::optional<std::string_view> name = keys::IdempotencyKeyName(it->key().ToStringView());
    auto entry = codec::DecodeIdempotency(it->value().ToStringView());
    if (!name || !entry.ok()) return absl::DataLossError("corrupt idempotency key");
    out.push_back(QueueWrite::KeyEntry{queue_id, std::string(*name), entry->first, entry->second});
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load idempotency keys");
  return out;
}

absl::StatusOr<std::vector<std::string>> RocksDbQueueStore::LoadAudit(QueueId queue_id) {
  std::vector<std::string> out;
  const std::string prefix = keys::QueueKey(queue_id);
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), audit_.get()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    out.push_back(it->value().ToString());
  }
  if (!it->status().ok()) return ToStatus(it->status(), "load audit");
  return out;
}

absl::Status RocksDbQueueStore::Write(const std::vector<const QueueWrite*>& writes) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  auto check = [&](const rocksdb::Status& st) {
    if (s.ok()) s = st;
  };
  for (const QueueWrite* w : writes) {
    const QueueId q = w->queue_id;
    if (w->create_queue) {
      check(batch.Put(queues_.get(), keys::QueueKey(q), codec::EncodeQueue(*w->create_queue)));
    }
    if (w->next_job_id) {
      check(batch.Put(counters_.get(), keys::kNextJobIdKey, codec::EncodeCounter(*w->next_job_id)));
    }
    if (w->drop_queue) {
      check(batch.Delete(queues_.get(), keys::QueueKey(q)));
      // A range deletion must start at a key no longer than the insert-hint prefix (Open):
      // the bare queue key, never a job key (rocksdb_util::DefaultCfOptions).
      for (const auto& cf : {jobs_, job_index_, leases_, idempotency_, audit_}) {
        check(
            batch.DeleteRange(cf.get(), keys::QueueKey(q), keys::QueueKey(QueueId(q.value() + 1))));
      }
    }
    for (const Job& job : w->puts) {
      const std::string key = keys::JobKey(q, job.id);
      check(batch.Put(jobs_.get(), key, codec::EncodeJob(job)));
      check(batch.Put(job_index_.get(), key, codec::EncodeIndexEntry(JobIndexEntry::Of(job))));
    }
    for (uint64_t id : w->deletes) {
      const std::string key = keys::JobKey(q, id);
      for (const auto& cf : {jobs_, job_index_, leases_}) check(batch.Delete(cf.get(), key));
    }
    for (const LeaseRecord& lease : w->lease_puts) {
      check(batch.Put(leases_.get(), keys::JobKey(q, lease.job_id), codec::EncodeLease(lease)));
    }
    for (uint64_t id : w->lease_deletes) check(batch.Delete(leases_.get(), keys::JobKey(q, id)));
    for (const std::string& key : w->key_deletes) {
      check(batch.Delete(idempotency_.get(), keys::IdempotencyKey(q, key)));
    }
    for (const auto& k : w->key_puts) {
      check(batch.Put(idempotency_.get(), keys::IdempotencyKey(q, k.key),
                      codec::EncodeIdempotency(k.job_id, k.at)));
    }
    for (const auto& a : w->audit) {
      check(batch.Put(audit_.get(), keys::AuditKey(q, absl::ToUnixMicros(a.at), audit_seq_++),
                      a.text));
    }
  }
  if (!s.ok()) return ToStatus(s, "build queue write batch");
  if (batch.Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions options;
  options.sync =
      std::any_of(writes.begin(), writes.end(), [](const QueueWrite* w) { return w->sync; });
  return ToStatus(db_.db()->Write(options, &batch), "write queue changes");
}

absl::Status RocksDbQueueStore::SyncWal() { return ToStatus(db_.db()->SyncWAL(), "sync wal"); }

}  // namespace conduit::work_queue
