#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/append_pipeline.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/topic_state.h"

namespace conduit::log_broker {

struct CleanerOptions {
  // Records one pass may scan per partition, for retention and for compaction each.
  int64_t max_records_per_pass = 200'000;
  // Deletes per write (one write is one batch of the append pipeline).
  int32_t max_deletes_per_write = 10'000;
  // Keys one compaction round may map; a longer dirty section is compacted in several rounds.
  size_t max_compaction_keys = 1'000'000;
  // Dedup entries one pass may expire per partition.
  int32_t max_dedup_expiries_per_pass = 100'000;
};

// Removes what a topic's policy says must go, in bounded passes:
// - retention (cleanup policy delete): the oldest records of each partition, by append time
//   (older than retention_time) and by size (beyond retention_bytes) — one range delete that
//   advances the log start offset;
// - compaction (cleanup policy compact): every record with a newer record of the same key, and
//   tombstones older than tombstone_retention. Survivors keep their offsets. Like Kafka's
//   cleaner: map the keys of the "dirty" section (appended since the last round) to their
//   latest offsets, then sweep from the log start deleting superseded records;
// - dedup expiry: event ids older than the dedup window.
// The cleaner reads the store itself, and hands every change to the AppendPipeline as
// maintenance work, so changes are atomic with the partition's bookkeeping and ordered with
// appends. Produce is never blocked beyond sharing a write.
//
// Thread-compatible: RunOnce calls are serialized by an internal mutex.
class LogCleaner {
 public:
  LogCleaner(LogStore* store, AppendPipeline* pipeline, const time::Clock* clock,
             BrokerObserver* observer, CleanerOptions options)
      : store_(store), pipeline_(pipeline), clock_(clock), observer_(observer), options_(options) {}

  // One pass over `topics`. Blocking: reads the store and waits for its writes.
  void RunOnce(const std::vector<std::shared_ptr<TopicState>>& topics);

 private:
  // Per-partition compaction progress (memory only: after a restart compaction starts over,
  // which is safe because it only ever deletes superseded records).
  struct CompactionJob {
    enum class Phase { kIdle, kMap, kSweep } phase = Phase::kIdle;
    int64_t clean_upto = 0;  // [log start, clean_upto) holds at most one record per key
    int64_t dirty_end = 0;
    int64_t cursor = 0;
    absl::flat_hash_map<std::string, int64_t> latest;  // key → newest offset in the dirty section
    absl::Time last_sweep = absl::InfinitePast();
  };

  // A partition's log bounds and size, read under its mutex.
  struct Snapshot {
    int64_t start;
    int64_t end;  // high watermark
    int64_t bytes;
  };
  static Snapshot Snap(const PartitionLog& part);

  // What one retention pass removes: the records before new_start.
  struct RetentionCut {
    int64_t new_start = 0;
    int64_t removed = 0;
    int64_t removed_bytes = 0;
    std::optional<absl::Time> survivor_time;  // append time of the first record kept, if read
  };

  void ApplyRetention(const std::shared_ptr<TopicState>& topic, int32_t partition,
                      const TopicConfig& config, absl::Time now);
  // Scans from the log start for the records retention removes: those before `time_target`,
  // and the oldest while the partition is over retention_bytes. nullopt when a read fails.
  std::optional<RetentionCut> FindRetentionCut(const TopicState& topic, int32_t partition,
                                               const TopicConfig& config, const Snapshot& snap,
                                               int64_t time_target);
  // Writes the cut (one range delete), unless the log start moved from `old_start` meanwhile.
  absl::Status AdvanceLogStart(const std::shared_ptr<TopicState>& topic, int32_t partition,
                               int64_t old_start, const RetentionCut& cut);

  void Compact(const std::shared_ptr<TopicState>& topic, int32_t partition,
               const TopicConfig& config, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  // Compact's phases, each one step of `job`. They return false when the pass should stop (no
  // work, a failed read or write, or a completed round); kMap and kSweep spend `budget`.
  // kIdle: starts a round when records were appended or tombstones may have expired.
  bool StartCompactionRound(CompactionJob& job, const Snapshot& snap, const TopicConfig& config,
                            absl::Time now);
  // kMap: maps keys of the dirty section to their latest offsets, one chunk.
  bool MapDirtyKeys(CompactionJob& job, const TopicState& topic, int32_t partition,
                    const Snapshot& snap, int64_t* budget);
  // kSweep: deletes the superseded records and expired tombstones of one chunk.
  bool SweepChunk(CompactionJob& job, const std::shared_ptr<TopicState>& topic, int32_t partition,
                  const TopicConfig& config, absl::Time now, const Snapshot& snap, int64_t* budget);
  // Re-reads the first record's append time after a cleanup removed the first records without
  // seeing the next one.
  void RefreshOldest(const std::shared_ptr<TopicState>& topic, int32_t partition);
  void ExpireDedup(const std::shared_ptr<TopicState>& topic, const TopicConfig& config,
                   absl::Time now);
  // Submits `build` as maintenance work and waits for it to be written.
  absl::Status RunMaintenance(const std::shared_ptr<TopicState>& topic,
                              std::function<void(BatchContext&)> build);

  LogStore* const store_;
  AppendPipeline* const pipeline_;
  const time::Clock* const clock_;
  BrokerObserver* const observer_;
  const CleanerOptions options_;

  absl::Mutex run_mu_;
  absl::flat_hash_map<std::pair<TopicId, int32_t>, CompactionJob> jobs_ ABSL_GUARDED_BY(run_mu_);
};

}  // namespace conduit::log_broker
