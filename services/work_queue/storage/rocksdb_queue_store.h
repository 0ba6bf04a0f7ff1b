#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <rocksdb/file_system.h>

#include "common/rocksdb/rocksdb_util.h"
#include "common/rocksdb/space_guard.h"
#include "services/work_queue/domain/bridge.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue {

// How RocksDbQueueStore::Open reaches the disk.
struct RocksDbQueueStoreOptions {
  // The file system under the database; null is RocksDB's default, the local disk. Tests pass
  // a conduit::testing::PowerLossFileSystem to lose what was not synced.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

// QueueStore on one RocksDB instance with column families queues, jobs, job_index, leases,
// idempotency, audit, counters and bridges (storage/key_schema.h). Thread-safe.
class RocksDbQueueStore final : public QueueStore, public BridgeStore {
 public:
  static absl::StatusOr<std::unique_ptr<RocksDbQueueStore>> Open(
      const std::string& path, const RocksDbQueueStoreOptions& options = {});

  absl::StatusOr<std::vector<QueueMeta>> LoadQueues() override;
  absl::StatusOr<uint64_t> LoadNextJobId() override;
  absl::Status ScanIndex(QueueId queue_id,
                         const std::function<absl::Status(const JobIndexEntry&)>& fn) override;
  absl::StatusOr<std::vector<LeaseRecord>> LoadLeases(QueueId queue_id) override;
  absl::StatusOr<std::vector<std::optional<Job>>> ReadJobs(
      QueueId queue_id, const std::vector<uint64_t>& ids) override;
  absl::StatusOr<std::vector<QueueWrite::KeyEntry>> LoadKeys(QueueId queue_id) override;
  absl::Status Write(const std::vector<const QueueWrite*>& writes) override;
  absl::Status SyncWal() override;
  absl::Status CheckSpace() const override { return space_.Check(); }

  absl::StatusOr<std::vector<BridgeSpec>> LoadBridges() override;
  absl::Status PutBridge(const BridgeSpec& spec) override;
  absl::Status DeleteBridge(const std::string& name) override;

  // Audit lines of a queue, oldest first.
  absl::StatusOr<std::vector<std::string>> LoadAudit(QueueId queue_id);

 private:
  RocksDbQueueStore(rocksdb_util::OpenDb db, const std::string& path);

  // Stores written before the counters column family kept the next job id among the queues.
  absl::Status MoveLegacyNextJobId();
  // Stores written before the job index and lease column families: one pass that adds them.
  absl::Status IndexLegacyJobs();
  rocksdb_util::OpenDb db_;
  const rocksdb_util::SpaceGuard space_;  // checked before every write that adds data
  rocksdb_util::OpenDb::Handle queues_, jobs_, idempotency_, audit_, counters_, bridges_,
      job_index_, leases_;
  // Starts from the wall clock so that keys of a later process never overwrite earlier lines.
  std::atomic<uint64_t> audit_seq_;
};

}  // namespace conduit::work_queue
