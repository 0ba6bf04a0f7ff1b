#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/dedup_window.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/replica_state.h"

namespace conduit::log_broker {

// One partition's live state: everything about it that moves with it when another broker
// leads it — its offsets, leader epoch, producer state, dedup window and append clock.
//
// Two owners. Fields marked "writer" belong to the append writer thread (appends and
// maintenance are serialised there). Everything readers see is guarded by `mu` and changes only
// after a write is durable.
//
// Invariants: log_start_offset <= high_watermark <= log end offset (meta.next_offset); the high
// watermark never goes back; append times never go back within the partition; every record
// carries the leader epoch under which it was appended, and epochs never go back along the log.
// With one replica the high watermark is the durable log end; with replication it is the least
// durable log end over the in-sync replicas (ReplicaState).
struct Partition {
  // Writer: the offset the next appended record gets. Equals meta.next_offset between batches;
  // runs ahead of it while a batch is being written.
  int64_t next_offset = 0;
  // Writer: idempotent producers seen in this partition, by producer id.
  absl::flat_hash_map<ProducerId, ProducerPartitionState> producers;
  // Writer: event ids within the dedup window.
  DedupWindow dedup;

  mutable absl::Mutex mu;
  // Durable bookkeeping: log start, log end (next_offset), counts, leader epoch of the last
  // append. Written with every change to the partition's records.
  PartitionMeta meta ABSL_GUARDED_BY(mu);
  // Readers see offsets below it: Fetch, Tail and ListOffsets stop here.
  int64_t high_watermark ABSL_GUARDED_BY(mu) = 0;
  // Where this broker's own copy stops being durable while a sync batch it has published (so
  // that followers may copy it) is being fsynced; the high watermark stays below it. No limit
  // otherwise.
  int64_t durable_end ABSL_GUARDED_BY(mu) = std::numeric_limits<int64_t>::max();
  // The epoch appends are stamped with: 0 on a single node; in a cluster the epoch at which the
  // metadata made this broker the leader.
  int32_t leader_epoch ABSL_GUARDED_BY(mu) = 0;
  // The leader-epoch cache: each epoch that appended here → the first offset it appended.
  // Durable with that first record. What a follower asks about to find where its log and the
  // leader's part (OffsetForLeaderEpoch, KIP-101/279).
  std::map<int32_t, int64_t> epoch_starts ABSL_GUARDED_BY(mu);
  absl::Time oldest_append_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Time last_append_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  // Long-polls and tails waiting for the high watermark to move, by waiter id.
  absl::flat_hash_map<uint64_t, std::function<void()>> waiters ABSL_GUARDED_BY(mu);
  // Replication: the role, in-sync set and followers' progress; produce requests waiting for
  // the high watermark (acks all); followers' fetches waiting for the log end to move.
  ReplicaState replica ABSL_GUARDED_BY(mu);
  AckWaiters acks ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, std::function<void()>> replica_waiters ABSL_GUARDED_BY(mu);

  // Moves the high watermark as far as the replication state allows (never back), adding to
  // `wake` the waiters that can now proceed: long-polls and acknowledgements. Returns whether
  // it moved.
  bool AdvanceHighWatermark(std::vector<std::function<void()>>* wake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int64_t target = replica.HighWatermark(std::min(meta.next_offset, durable_end));
    if (target <= high_watermark) return false;
    high_watermark = target;
    for (auto& fn : TakeWaiters()) wake->push_back(std::move(fn));
    for (auto& done : acks.Release(high_watermark)) {
      wake->push_back([done = std::move(done)] { done(absl::OkStatus()); });
    }
    return true;
  }

  // Takes every waiter, to be called outside the lock.
  std::vector<std::function<void()>> TakeWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::vector<std::function<void()>> out;
    out.reserve(waiters.size());
    for (auto& [id, fn] : waiters) out.push_back(std::move(fn));
    waiters.clear();
    return out;
  }
  // Wakes every waiter (their reads then see what changed, e.g. the topic deleted).
  void WakeWaiters() ABSL_LOCKS_EXCLUDED(mu) {
    std::vector<std::function<void()>> wake;
    {
      absl::MutexLock lock(&mu);
      wake = TakeWaiters();
    }
    for (auto& fn : wake) fn();
  }
};

}  // namespace conduit::log_broker
