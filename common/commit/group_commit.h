#pragma once

#include <pthread.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status/status_macros.h"
#include "common/time/clock.h"

namespace conduit::commit {

struct GroupCommitOptions {
  std::string service;  // names the service in statuses ("broker", "queue", ...)
  // Bounded submissions beyond this many queued bytes are refused with RESOURCE_EXHAUSTED.
  int64_t max_queued_bytes = 256 << 20;
  // One batch carries at most this many bytes (and always at least one entry).
  int64_t max_batch_bytes = 16 << 20;
  // While the disk is full, how often the held batch is tried again.
  absl::Duration disk_full_retry = absl::Milliseconds(200);
  // Optional: RESOURCE_EXHAUSTED while the store's volume is below its reserve (the store's
  // SpaceGuard), asked by health() and Submit(kBounded) so that changes are refused before they
  // are made rather than held.
  std::function<absl::Status()> space_check;
};

// Whether Submit may refuse an entry because too much is queued.
enum class Admission { kBounded, kAlways };

// True for the status a store returns when it refuses a write because its volume is nearly
// full (rocksdb_util::SpaceGuard): nothing was written, and the same write may be tried again.
inline bool IsDiskFull(const absl::Status& s) {
  return s.code() == absl::StatusCode::kResourceExhausted;
}

// The group-commit engine of every service. Entries are submitted in the order the domain made
// them; one writer thread takes what is queued (up to max_batch_bytes) and hands it to `write`,
// which makes the batch durable as one storage write. Then `complete` is called for each entry of
// the batch, in order, with the outcome: by one completion thread, so that replies (gRPC sends
// them inline) never hold up the next write; or, when nothing is queued for the next write and
// the completion thread has nothing to do, by the writer itself, which saves two thread wake-ups
// per batch (the completion thread's, and gRPC's to send what it answers) where there is no next
// write to hold up. Batches are completed in the order they were written either way.
//
// Failure rules, the same in every service:
// - A full disk is not fatal: the store refuses the write before writing anything. A domain that
//   can undo what it staged (the broker) returns that RESOURCE_EXHAUSTED from `write`, and the
//   batch is answered with it. A domain whose memory is already ahead of the disk (coordinator,
//   queue) writes through WriteDurably, which holds the batch and tries it again every
//   `disk_full_retry` until it is written; meanwhile health() and Submit(kBounded) answer
//   RESOURCE_EXHAUSTED, so new changes are refused before they are made, while reads go on.
//   Nothing of a held batch is answered until it is durable (or the engine stops: UNAVAILABLE,
//   never success).
// - Any other write failure is sticky: memory and disk may disagree, so every later write is
//   refused UNAVAILABLE until a restart.
//
// Thread-safe. `write` runs on the writer thread, `complete` on the writer or the completion
// thread (never both at once); they are named "<service>-write" and "<service>-reply" (cut to
// Linux's 15 characters), as `top -H`, `perf` and /proc/<pid>/task/*/comm show them.
template <typename Entry>
class GroupCommit {
 public:
  using WriteFn = std::function<absl::Status(std::vector<Entry>& batch)>;
  using CompleteFn = std::function<void(Entry& entry, const absl::Status& outcome)>;

  GroupCommit(GroupCommitOptions options, const time::Clock* clock, WriteFn write,
              CompleteFn complete)
      : options_(std::move(options)),
        clock_(clock),
        write_(std::move(write)),
        complete_(std::move(complete)),
        writer_([this] { WriterLoop(); }),
        completer_([this] { CompletionLoop(); }) {}

  // Writes what is queued (a batch held by a full disk is given up: UNAVAILABLE), completes
  // everything, then joins.
  ~GroupCommit() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      retry_cv_.SignalAll();
    }
    writer_.join();
    {
      absl::MutexLock lock(&done_mu_);
      done_stopping_ = true;
    }
    completer_.join();
  }
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Queues `entry` (`bytes` counts toward the caps). Refused, without queuing, with
  // RESOURCE_EXHAUSTED when the queue is full (kBounded) or the disk is full (kBounded), and
  // UNAVAILABLE after a storage failure or during shutdown.
  absl::Status Submit(Entry entry, int64_t bytes, Admission admission = Admission::kBounded) {
    // A syscall (statvfs): asked before taking the lock every submitter shares.
    if (admission == Admission::kBounded && options_.space_check) {
      CONDUIT_RETURN_IF_ERROR(options_.space_check());
    }
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    if (stopping_) return absl::UnavailableError(absl::StrCat(options_.service, " is shutting down"));
    if (admission == Admission::kBounded) {
      if (!disk_full_.ok()) return disk_full_;
      if (queued_bytes_ > 0 && queued_bytes_ + bytes > options_.max_queued_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(options_.service, " write queue holds ", queued_bytes_,
                         " bytes (limit ", options_.max_queued_bytes, "); retry after 50ms"));
      }
    }
    queued_bytes_ += bytes;
    queue_.push_back(Queued{std::move(entry), bytes});
    return absl::OkStatus();
  }

  // OK; RESOURCE_EXHAUSTED while the disk is full or more than max_queued_bytes wait; or the
  // UNAVAILABLE status of a storage failure. Domains that change memory before they submit
  // (and so submit kAlways) check it before they change anything.
  absl::Status health() const {
    {
      absl::MutexLock lock(&mu_);
      if (!failed_.ok()) return failed_;
      if (!disk_full_.ok()) return disk_full_;
      if (queued_bytes_ > options_.max_queued_bytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat(options_.service, " write queue holds ", queued_bytes_, " bytes (limit ",
                         options_.max_queued_bytes, "); retry after 50ms"));
      }
    }
    return options_.space_check ? options_.space_check() : absl::OkStatus();
  }

  // The sticky storage failure, or OK. For reads: after it memory may hold what the disk does
  // not, while a full disk or queue changes nothing that is shown.
  absl::Status failure() const {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

  // For `write`, on the writer thread: runs the storage write `fn`, and while the store refuses
  // it for a full disk, waits and runs it again (see the class comment). Returns OK, or the
  // failure `write` returns.
  absl::Status WriteDurably(const std::function<absl::Status()>& fn) {
    absl::Status s = fn();
    while (IsDiskFull(s)) {
      {
        absl::MutexLock lock(&mu_);
        disk_full_ = absl::ResourceExhaustedError(
            absl::StrCat(s.message(), "; ", options_.service,
                         " changes are refused until then, reads keep working"));
        const absl::Duration until = clock_->Monotonic() + options_.disk_full_retry;
        while (!stopping_ && clock_->Monotonic() < until) {
          clock_->WaitUntil(&retry_cv_, &mu_, until);
        }
        if (stopping_) {
          gave_up_ = true;
          return absl::UnavailableError(absl::StrCat(
              options_.service, " stopped while its disk was full; the change was not written"));
        }
      }
      s = fn();
    }
    absl::MutexLock lock(&mu_);
    disk_full_ = absl::OkStatus();
    return s;
  }

  // Runs `fn` while no batch is being written (between batches).
  void RunExclusive(const std::function<void()>& fn) {
    absl::MutexLock lock(&write_mu_);
    fn();
  }

 private:
  struct Queued {
    Entry entry;
    int64_t bytes = 0;
  };
  struct Done {
    std::vector<Entry> batch;
    absl::Status outcome;
  };

  // Names the calling thread "<service><suffix>", cut to the 15 characters Linux keeps.
  void NameThisThread(const char* suffix) const {
    const std::string name = absl::StrCat(options_.service, suffix).substr(0, 15);
    pthread_setname_np(pthread_self(), name.c_str());
  }

  void WriterLoop() {
    NameThisThread("-write");
    while (true) {
      std::vector<Entry> batch;
      absl::Status failed;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](GroupCommit* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
              return c->stopping_ || !c->queue_.empty();
            },
            this));
        if (queue_.empty()) return;  // stopping, and everything queued has been written
        int64_t bytes = 0;
        while (!queue_.empty() &&
               (batch.empty() || bytes + queue_.front().bytes <= options_.max_batch_bytes)) {
          bytes += queue_.front().bytes;
          batch.push_back(std::move(queue_.front().entry));
          queue_.pop_front();
        }
        queued_bytes_ -= bytes;
        failed = failed_;
      }
      if (failed.ok()) {
        absl::MutexLock write_lock(&write_mu_);
        gave_up_ = false;
        absl::Status s = write_(batch);
        if (!s.ok() && (gave_up_ || IsDiskFull(s))) {
          failed = s;  // refused for space, or given up at shutdown: nothing was written
        } else if (!s.ok()) {
          failed = absl::UnavailableError(
              absl::StrCat("storage write failed (", s.message(), "); the ", options_.service,
                           " accepts no changes until it is restarted"));
          absl::MutexLock lock(&mu_);
          failed_ = failed;
        }
      }
      if (CompleteHere()) {
        for (Entry& e : batch) complete_(e, failed);
        continue;
      }
      absl::MutexLock lock(&done_mu_);
      done_queue_.push_back(Done{std::move(batch), std::move(failed)});
    }
  }

  // Writer thread, after a write: whether it completes the batch itself (see the class comment).
  bool CompleteHere() {
    {
      absl::MutexLock lock(&mu_);
      if (!queue_.empty()) return false;
    }
    absl::MutexLock lock(&done_mu_);
    return done_queue_.empty() && !completing_;
  }

  void CompletionLoop() {
    NameThisThread("-reply");
    while (true) {
      std::deque<Done> ready;
      {
        absl::MutexLock lock(&done_mu_);
        done_mu_.Await(absl::Condition(
            +[](GroupCommit* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->done_mu_) {
              return c->done_stopping_ || !c->done_queue_.empty();
            },
            this));
        if (done_queue_.empty()) return;  // stopping and drained
        ready.swap(done_queue_);
        completing_ = true;
      }
      for (Done& d : ready) {
        for (Entry& e : d.batch) complete_(e, d.outcome);
      }
      absl::MutexLock lock(&done_mu_);
      completing_ = false;
    }
  }

  const GroupCommitOptions options_;
  const time::Clock* const clock_;
  const WriteFn write_;
  const CompleteFn complete_;

  // Held by the writer while it builds and writes one batch.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  bool gave_up_ = false;  // writer thread only: WriteDurably gave up at shutdown

  mutable absl::Mutex mu_;
  absl::CondVar retry_cv_;  // wakes a disk-full wait at shutdown
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  absl::Status disk_full_ ABSL_GUARDED_BY(mu_);

  // Completions of written batches, run in order by the completion thread.
  absl::Mutex done_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::deque<Done> done_queue_ ABSL_GUARDED_BY(done_mu_);
  bool done_stopping_ ABSL_GUARDED_BY(done_mu_) = false;
  // The completion thread is completing batches it took from done_queue_.
  bool completing_ ABSL_GUARDED_BY(done_mu_) = false;

  std::thread writer_;     // last: start after every other member is constructed
  std::thread completer_;
};

}  // namespace conduit::commit
