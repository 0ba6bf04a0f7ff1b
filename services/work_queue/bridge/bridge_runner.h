#pragma once

// One running bridge: a thread that polls the topic as a member of the bridge's group, turns the
// records into jobs (domain/bridge.h), enqueues them durably and only then commits the offsets.
// See services/work_queue/README.md, "Bridges".

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/group_consumer.h"
#include "common/time/clock.h"
#include "services/work_queue/domain/bridge.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::bridge {

// Where bridges read: log brokers (bootstrap) and the group coordinator.
struct BridgeEndpoints {
  std::string bootstrap;
  std::string coordinator;
};

enum class BridgeRunState { kRunning, kPaused, kBackingOff, kFailing };

// What a runner reports (DescribeBridge, metrics).
struct BridgeStatus {
  BridgeRunState state = BridgeRunState::kRunning;
  int64_t bridged = 0;
  int64_t filtered = 0;
  std::string last_error;
  absl::Time last_error_time = absl::InfinitePast();
};

// Hooks for metrics; the default does nothing. Called from runner threads; must not block.
class BridgeObserver {
 public:
  virtual ~BridgeObserver() = default;
  virtual void OnBridged(const std::string& bridge, int64_t jobs, int64_t filtered) {}
  virtual void OnRefused(const std::string& bridge) {}
  virtual void OnRunning(const std::string& bridge, bool running) {}
  virtual void OnLag(const std::string& bridge, int64_t records, double seconds) {}
  virtual void OnForgotten(const std::string& bridge) {}
};

struct BridgeLag {
  int64_t records = 0;
  double seconds = 0;
};
// The bridge's group lag over its topic, asked of the coordinator: records summed over the
// partitions, seconds the largest. UNAVAILABLE (or the coordinator's error) when it cannot say.
absl::StatusOr<BridgeLag> AskLag(const std::string& coordinator, const BridgeSpec& spec);

class BridgeRunner {
 public:
  // Starts the thread. `queue`, `observer` and `clock` must outlive the runner. Every wait
  // (backoff, the lag report's interval) and every time it records are `clock`'s.
  //
  // A thread of its own rather than a task on the process's Runtime: the loop blocks for the
  // bridge's whole life (a poll waits up to half a second, an enqueue until it is durable), and
  // the Runtime's bounded pools are for work that ends.
  BridgeRunner(BridgeSpec spec, WorkQueue* queue, BridgeEndpoints endpoints,
               BridgeObserver* observer, const time::Clock* clock);
  ~BridgeRunner();  // Stop()

  // Ends the thread: the member leaves its group. A batch not yet durable is not committed.
  void Stop();
  BridgeStatus Status() const;

 private:
  void Run();
  // Creates the group member, or records why not.
  bool Connect(std::unique_ptr<client::GroupConsumer>* consumer);
  // Enqueues `jobs` until they are durable: true. False when stopping, or after an error the
  // queue will keep answering (the caller then rejoins from the committed offsets).
  bool EnqueueDurably(const std::vector<NewJob>& jobs);
  void SetState(BridgeRunState state);
  void Fail(BridgeRunState state, const std::string& error);
  // Waits `d` (the clock's) or until Stop; false when stopping.
  bool Wait(absl::Duration d);
  void MaybeReportLag();

  const BridgeSpec spec_;
  WorkQueue* const queue_;
  const BridgeEndpoints endpoints_;
  BridgeObserver* const observer_;
  const time::Clock* const clock_;

  mutable absl::Mutex mu_;
  absl::CondVar stopped_;  // signalled by Stop
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  BridgeStatus status_ ABSL_GUARDED_BY(mu_);
  // The runner thread's own: when the lag was last reported (the clock's monotonic reading).
  absl::Duration lag_reported_ = -absl::InfiniteDuration();
  std::thread thread_;
};

}  // namespace conduit::work_queue::bridge
