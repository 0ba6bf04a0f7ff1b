#pragma once

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

namespace conduit::commit {

// Group commit for a service's changes. Changes are submitted in the order the domain made them
// (under its lock); one thread hands everything queued to `write_fn` as one durable write, then
// runs the callbacks in order. A failed write stops the log: every later Submit fails
// UNAVAILABLE, because memory and disk may disagree until a restart. Thread-safe.
//
// `Write` is the service's description of one change; `write_fn` makes a batch of them durable
// (for RocksDB: one WriteBatch with sync).
template <typename Write>
class CommitLog {
 public:
  using WriteFn = std::function<absl::Status(const std::vector<const Write*>&)>;

  CommitLog(std::string service, WriteFn write_fn)
      : service_(std::move(service)), write_fn_(std::move(write_fn)), thread_([this] { Loop(); }) {}
  ~CommitLog() {  // writes what is queued, then stops
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  CommitLog(const CommitLog&) = delete;
  CommitLog& operator=(const CommitLog&) = delete;

  // `done` runs on the log's thread once `write` is durable (or failed). An empty write is a
  // barrier: done runs after every earlier write is durable.
  void Submit(Write write, std::function<void(absl::Status)> done) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(Entry{std::move(write), std::move(done)});
  }

  // OK, or the UNAVAILABLE status every write gets after a storage failure.
  absl::Status health() {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

 private:
  struct Entry {
    Write write;
    std::function<void(absl::Status)> done;
  };

  void Loop() {
    while (true) {
      std::deque<Entry> batch;
      absl::Status failed;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](CommitLog* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
              return c->stopping_ || !c->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        batch.swap(queue_);
        failed = failed_;
      }
      if (failed.ok()) {
        std::vector<const Write*> writes;
        writes.reserve(batch.size());
        for (const Entry& e : batch) writes.push_back(&e.write);
        absl::Status s = write_fn_(writes);
        if (!s.ok()) {
          failed = absl::UnavailableError(absl::StrCat("storage write failed (", s.message(),
                                                       "); the ", service_,
                                                       " service needs a restart"));
          absl::MutexLock lock(&mu_);
          failed_ = failed;
        }
      }
      for (Entry& e : batch) e.done(failed);
    }
  }

  const std::string service_;
  const WriteFn write_fn_;
  absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after every other member is constructed
};

}  // namespace conduit::commit
