#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "services/work_queue/domain/dead_letter_lane.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/job_index.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue {

class QueueObserver;

// Reading one queue's job records back (a lease needs the payload; listing, redriving): from
// the records whose write is still in the commit log (`pending`), from those read ahead for
// batch leases, else from the store. The README's Threading section says why each is never
// stale. Not thread-safe: the owning JobQueue's caller holds the queue's lock, except where a
// method says otherwise.
class JobRecords {
 public:
  JobRecords(QueueId queue_id, std::string queue_name, QueueStore* store, QueueObserver* observer)
      : queue_id_(queue_id),
        queue_name_(std::move(queue_name)),
        store_(store),
        observer_(observer) {}

  // A read of records planned under the lock (what `pending` holds, copied) to finish without
  // it (Finish): valid while no one else writes those jobs (the lease they are being given out
  // for).
  struct PlannedRead {
    QueueId queue_id;
    std::string queue_name;
    std::vector<uint64_t> ids;
    std::vector<std::optional<Job>> records;  // by position: copied from `pending`, else empty
    std::vector<size_t> from_store;           // the positions to read from the store
  };
  PlannedRead Plan(std::vector<uint64_t> ids) const;
  // Moves the records of `plan`'s store reads that were read ahead into it (a lease's read).
  void TakeReadAhead(PlannedRead* plan);
  // The records of `plan`, in order, reading the store for what it needs; INTERNAL when one is
  // missing. Needs no lock.
  static absl::StatusOr<std::vector<Job>> Finish(QueueStore& store, PlannedRead plan);
  // Plan and Finish at once (under the lock).
  absl::StatusOr<std::vector<Job>> Read(const std::vector<uint64_t>& ids) const;
  // Read of one job, for DeadLetterLane.
  JobReader Reader() const;
  // Whether job `id` exists in any state (an error path: may read the store); `dead` is the
  // queue's lane.
  bool Exists(uint64_t id, const DeadLetterLane& dead) const;

  // A write of these records and deletes (`seq` numbers it) is queued: they are read from here
  // until ClearPending(seq) says the store has them; a record read ahead is dropped.
  // Returns the ids written, for ClearPending.
  std::vector<uint64_t> NotePending(uint64_t seq, const std::vector<Job>& puts,
                                    const std::vector<uint64_t>& deletes);
  void ClearPending(uint64_t seq, const std::vector<uint64_t>& ids);

  // Read-ahead (the README's Threading section). The last Lease asked for `jobs` (0: not a
  // batch, nothing read ahead).
  void SetReadAheadJobs(int32_t jobs) { ahead_.jobs = jobs; }
  // After an AckBatch: the next ready jobs of `index` to read ahead that are not read ahead yet
  // (marking a read-ahead in flight); none when one is in flight or most are read ahead.
  std::optional<std::vector<uint64_t>> PlanReadAhead(const JobIndex& index);
  // Reads them without the lock, in slices, stopping at kReadAheadMaxBytes of payload; returns
  // what was read and how many were not read because the store's read failed.
  struct ReadAheadResult {
    std::vector<std::pair<uint64_t, Job>> read;
    int64_t bytes = 0;
    size_t failed = 0;
  };
  static ReadAheadResult ReadAhead(QueueStore& store, QueueId queue_id,
                                   const std::vector<uint64_t>& ids);
  // Keeps what a read-ahead read (under the lock again), except jobs written or leased since.
  void FinishReadAhead(ReadAheadResult result, const JobIndex& index);

  // Read-ahead after an AckBatch of this many jobs or more, of a queue whose last Lease asked
  // for as many; at most so many payload bytes held.
  static constexpr int32_t kReadAheadMinJobs = 16;
  static constexpr int64_t kReadAheadMaxBytes = 4 << 20;

 private:
  const QueueId queue_id_;
  const std::string queue_name_;
  QueueStore* const store_;
  QueueObserver* const observer_;
  // The latest record of each job whose write (seq) is still in the commit log; nullopt for a
  // delete.
  struct Pending {
    uint64_t seq = 0;
    std::optional<Job> job;
  };
  absl::flat_hash_map<uint64_t, Pending> pending_;
  // Records of jobs read ahead for the next batch Lease. Never older than the store or
  // `pending_`: a write of a job drops its record here and, while a read-ahead is in flight,
  // marks it, and a marked record is not kept when the read lands.
  struct ReadAhead {
    absl::flat_hash_map<uint64_t, Job> records;
    int64_t bytes = 0;                      // their payloads
    bool reading = false;                   // a read-ahead is in flight
    absl::flat_hash_set<uint64_t> written;  // jobs written since it started
    int32_t jobs = 0;  // as many as the last Lease asked for, if a batch (else 0: none)
    void Written(uint64_t id) {
      if (auto node = records.extract(id)) {
        bytes -= static_cast<int64_t>(node.mapped().payload.size());
      }
      if (reading) written.insert(id);
    }
  } ahead_;
};

}  // namespace conduit::work_queue
