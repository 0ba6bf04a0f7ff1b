#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/commit/commit_log.h"
#include "common/time/clock.h"
#include "services/coordinator/domain/coordinator_store.h"

namespace conduit::coordinator {

// Where the groups' changes are made durable, in the order they are queued: a CommitLog over
// the CoordinatorStore (one writer thread, one fsynced write per round for what is queued).
// A change is queued under its group's mutex and its caller answered once it is durable, by
// waiting for its Outcome or by a continuation (Then). The one place group state meets
// durability: the coordinator's rules do not know how a change is kept.
//
// Thread-safe. Destroying it finishes what is queued.
class GroupLog {
 public:
  // The outcome of one queued change, known once it is durable (or failed).
  class Outcome {
   public:
    void Finish(absl::Status s);

   private:
    friend class GroupLog;
    absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status status_ ABSL_GUARDED_BY(mu_);
    std::function<void(absl::Status)> then_ ABSL_GUARDED_BY(mu_);
  };
  using OutcomePtr = std::shared_ptr<Outcome>;

  // `store` and `clock` must outlive the log.
  GroupLog(CoordinatorStore* store, const time::Clock* clock);

  // Queues `write`. `inflight`, when set, counts it among its group's unfinished writes until it
  // is durable, and keeps its owner (the group, through an aliasing shared_ptr) alive until then.
  OutcomePtr Submit(CoordinatorWrite write, std::shared_ptr<std::atomic<int>> inflight = nullptr);
  // Blocks until `outcome` is known (OK at once for null: nothing was queued).
  static absl::Status Wait(const OutcomePtr& outcome);
  // Runs `fn` with the outcome once it is known: on the log's thread, or at once when `outcome`
  // is null or already known.
  static void Then(const OutcomePtr& outcome, std::function<void(absl::Status)> fn);

  // Whether a change may be queued now: RESOURCE_EXHAUSTED (disk or queue full) or UNAVAILABLE
  // (a storage failure) otherwise. failure() only reports the latter.
  absl::Status health() const { return log_.health(); }
  absl::Status failure() const { return log_.failure(); }

 private:
  commit::CommitLog<CoordinatorWrite> log_;
};

}  // namespace conduit::coordinator
