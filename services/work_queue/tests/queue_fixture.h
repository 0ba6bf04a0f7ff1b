#pragma once

// A WorkQueue on the real RocksDB store in a temp dir, with a fake clock and synchronous
// helpers. Reopen() is a restart. FlakyQueueStore can make writes fail.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "services/work_queue/domain/work_queue.h"
#include "services/work_queue/storage/rocksdb_queue_store.h"

namespace conduit::work_queue {

// Passes everything to a real store, except that writes fail UNAVAILABLE while `fail` is set
// and that HoldNextRead() makes the next ReadJobs wait for ReleaseReads(); counts fsynced
// writes, completed WAL fsyncs and the records read.
class FlakyQueueStore final : public QueueStore {
 public:
  explicit FlakyQueueStore(QueueStore* real) : real_(real) {}
  absl::StatusOr<std::vector<QueueMeta>> LoadQueues() override { return real_->LoadQueues(); }
  absl::StatusOr<uint64_t> LoadNextJobId() override { return real_->LoadNextJobId(); }
  absl::Status ScanIndex(QueueId q,
                         const std::function<absl::Status(const JobIndexEntry&)>& fn) override {
    return real_->ScanIndex(q, fn);
  }
  absl::StatusOr<std::vector<LeaseRecord>> LoadLeases(QueueId q) override {
    return real_->LoadLeases(q);
  }
  absl::StatusOr<std::vector<std::optional<Job>>> ReadJobs(
      QueueId q, const std::vector<uint64_t>& ids) override {
    ids_read_.fetch_add(static_cast<int64_t>(ids.size()));
    absl::StatusOr<std::vector<std::optional<Job>>> read;
    bool held = false, after = false;
    {
      absl::MutexLock lock(&gate_mu_);
      held = hold_next_read_;
      after = hold_after_read_;
      hold_next_read_ = false;
    }
    if (held && after) read = real_->ReadJobs(q, ids);
    if (held) {
      absl::MutexLock lock(&gate_mu_);
      ++reads_held_;
      gate_mu_.Await(absl::Condition(&reads_released_));
      if (fail_held_read_) return absl::UnavailableError("injected read failure");
    }
    if (held && after) return read;
    return real_->ReadJobs(q, ids);
  }
  // The next ReadJobs waits for ReleaseReads(), then reads, or fails UNAVAILABLE if `then_fail`.
  // With `after_read`, it reads first and then waits (answering what it read before the wait).
  void HoldNextRead(bool then_fail = false, bool after_read = false) {
    absl::MutexLock lock(&gate_mu_);
    hold_next_read_ = true;
    fail_held_read_ = then_fail;
    hold_after_read_ = after_read;
    reads_released_ = false;
  }
  // Job records asked of ReadJobs so far.
  int64_t ids_read() const { return ids_read_.load(); }
  // Waits (real time, bounded) until a read is held; false when none came.
  bool AwaitHeldRead() {
    absl::MutexLock lock(&gate_mu_);
    return gate_mu_.AwaitWithTimeout(absl::Condition(this, &FlakyQueueStore::ReadIsHeld),
                                     absl::Seconds(5));
  }
  void ReleaseReads() {
    absl::MutexLock lock(&gate_mu_);
    reads_released_ = true;
  }
  absl::StatusOr<std::vector<QueueWrite::KeyEntry>> LoadKeys(QueueId q) override {
    return real_->LoadKeys(q);
  }
  absl::Status Write(const std::vector<const QueueWrite*>& writes) override {
    if (fail.load()) return absl::UnavailableError("injected write failure");
    const bool sync = std::any_of(writes.begin(), writes.end(), [](auto* w) { return w->sync; });
    ++(sync ? synced_writes : unsynced_writes);
    return real_->Write(writes);
  }
  absl::Status SyncWal() override {
    absl::Status s = real_->SyncWal();
    ++wal_syncs;  // counted once done, so a test that saw the count sees the fsync complete
    return s;
  }
  std::atomic<bool> fail{false};
  std::atomic<int> synced_writes{0}, unsynced_writes{0}, wal_syncs{0};

 private:
  bool ReadIsHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(gate_mu_) { return reads_held_ > 0; }

  QueueStore* const real_;
  absl::Mutex gate_mu_;
  bool hold_next_read_ ABSL_GUARDED_BY(gate_mu_) = false;
  bool fail_held_read_ ABSL_GUARDED_BY(gate_mu_) = false;
  bool hold_after_read_ ABSL_GUARDED_BY(gate_mu_) = false;
  std::atomic<int64_t> ids_read_{0};
  bool reads_released_ ABSL_GUARDED_BY(gate_mu_) = true;
  int reads_held_ ABSL_GUARDED_BY(gate_mu_) = 0;
};

template <typename T>
absl::StatusOr<T> Wait(const std::function<void(Callback<T>)>& call) {
  // Shared with the callback: a call that answers after the wait gave up must not write to a
  // returned frame.
  struct Answer {
    absl::Notification done;
    absl::StatusOr<T> result = absl::UnknownError("no answer");
  };
  auto answer = std::make_shared<Answer>();
  call([answer](absl::StatusOr<T> r) {
    answer->result = std::move(r);
    answer->done.Notify();
  });
  // Bounded, so that a call that never answers fails its test instead of hanging the suite.
  if (!answer->done.WaitForNotificationWithTimeout(absl::Seconds(30))) {
    return absl::DeadlineExceededError("the call did not answer within 30 s");
  }
  return std::move(answer->result);
}

// Waits (real time, bounded) for work the fake clock set off on the runtime's threads.
inline bool Eventually(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

inline NewJob JobFor(std::string payload, std::string tenant = "", int32_t priority = 0) {
  NewJob j;
  j.payload = std::move(payload);
  j.tenant = std::move(tenant);
  j.priority = priority;
  return j;
}

class WorkQueueTest : public ::testing::Test {
 protected:
  explicit WorkQueueTest(RocksDbQueueStoreOptions store_options = {})
      : store_options_(std::move(store_options)) {
    Reopen();
  }

  void Reopen() {
    queue_.reset();
    store_.reset();
    store_ = *RocksDbQueueStore::Open(dir_.path(), store_options_);
    flaky_ = std::make_unique<FlakyQueueStore>(store_.get());
    WorkQueueOptions options;
    options.scheduler_interval = absl::ZeroDuration();
    queue_ = std::make_unique<WorkQueue>(flaky_.get(), &runtime_, options, observer_);
    ASSERT_TRUE(queue_->Recover().ok());
  }

  void Create(const std::string& name, QueueConfigPatch config = {}) {
    auto created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue(name, config, cb); });
    ASSERT_TRUE(created.ok()) << created.status();
  }
  absl::StatusOr<std::vector<EnqueuedJob>> Enqueue(const std::string& q, std::vector<NewJob> jobs) {
    return Wait<std::vector<EnqueuedJob>>(
        [&](auto cb) { queue_->Enqueue(q, std::move(jobs), cb); });
  }
  absl::StatusOr<std::vector<Job>> Lease(const std::string& q, int32_t max_jobs = 1,
                                         std::string worker = "w1") {
    LeaseArgs args{q, worker, max_jobs, std::nullopt, absl::ZeroDuration()};
    return Wait<std::vector<Job>>([&](auto cb) { queue_->Lease(args, cb); });
  }
  absl::Status Ack(const Job& job) {
    return Wait<bool>([&](auto cb) { queue_->Ack("q", job.id, job.lease_token, cb); }).status();
  }
  absl::StatusOr<NackResult> Nack(const Job& job, std::string reason,
                                  FailureClass klass = FailureClass::kTransient) {
    NackArgs args{std::move(reason), klass, std::nullopt};
    return Wait<NackResult>([&](auto cb) { queue_->Nack("q", job.id, job.lease_token, args, cb); });
  }
  QueueStats Stats() { return *queue_->Stats("q"); }

  const RocksDbQueueStoreOptions store_options_;
  QueueObserver* observer_ = nullptr;  // for the queue the next Reopen() makes
  conduit::testing::TempDir dir_;
  time::FakeClock clock_;
  runtime::Runtime runtime_{&clock_};
  std::unique_ptr<RocksDbQueueStore> store_;
  std::unique_ptr<FlakyQueueStore> flaky_;
  std::unique_ptr<WorkQueue> queue_;
};

}  // namespace conduit::work_queue
