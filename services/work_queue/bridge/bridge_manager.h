#pragma once

// The bridges of one queue server: their specs (durable in a BridgeStore) and a BridgeRunner
// for each one not paused. See services/work_queue/README.md, "Bridges".

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time/clock.h"
#include "services/work_queue/bridge/bridge_runner.h"

namespace conduit::work_queue::bridge {

struct BridgeInfo {
  BridgeSpec spec;
  BridgeStatus status;
  std::optional<BridgeLag> lag;  // DescribeBridge only
  std::string lag_error;
};

// Thread-safe. Changes are durable when they return; a pause or delete returns once the
// runner's thread has ended (within a poll and a LeaveGroup).
class BridgeManager {
 public:
  // `store`, `queue`, `observer` and `clock` must outlive the manager.
  BridgeManager(BridgeStore* store, WorkQueue* queue, const time::Clock* clock,
                BridgeObserver* observer = nullptr);
  ~BridgeManager();  // stops every runner

  // Loads the specs and starts those not paused, reading from `endpoints` (fields left empty
  // default to `own_address`, this server's). Call once, when the server serves.
  absl::Status Start(BridgeEndpoints endpoints, const std::string& own_address);

  // Stops every runner (the server is shutting down); changes are then refused.
  void Stop();

  // INVALID_ARGUMENT, ALREADY_EXISTS, NOT_FOUND (queue), FAILED_PRECONDITION before Start.
  absl::StatusOr<BridgeInfo> Create(BridgeSpec spec);
  std::vector<BridgeInfo> List() const;
  // With the group's lag from the coordinator (a blocking call of at most 2 s).
  absl::StatusOr<BridgeInfo> Describe(const std::string& name) const;
  absl::Status Pause(const std::string& name);
  absl::Status Resume(const std::string& name);
  absl::Status Delete(const std::string& name);

 private:
  struct Entry {
    BridgeSpec spec;
    std::unique_ptr<BridgeRunner> runner;  // null while paused
  };
  BridgeInfo InfoOf(const Entry& e) const;
  absl::StatusOr<Entry*> Find(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<BridgeRunner> RunnerFor(const BridgeSpec& spec) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  BridgeStore* const store_;
  WorkQueue* const queue_;
  const time::Clock* const clock_;
  BridgeObserver default_observer_;
  BridgeObserver* const observer_;

  // Held across store writes and runner stops: bridge changes are rare and one at a time.
  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  BridgeEndpoints endpoints_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Entry> bridges_ ABSL_GUARDED_BY(mu_);
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::work_queue::bridge
