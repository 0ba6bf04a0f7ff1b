#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/commit/group_commit.h"
#include "common/time/clock.h"

namespace conduit::commit {

// GroupCommit for domains that apply a change in memory and then log it (the coordinator and
// the queue). Such a change cannot be refused after it is made, so Submit always queues it, and
// a write the store refuses for a full disk is held and retried (WriteDurably) until it is
// written; the domain asks health() first and refuses the change while the disk or the queue is
// full.
//
// `Write` is the service's description of one change; `write_fn` makes a batch of them durable
// (for RocksDB: one WriteBatch, synced when any write asks). Thread-safe.
template <typename Write>
class CommitLog {
 public:
  using WriteFn = std::function<absl::Status(const std::vector<const Write*>&)>;
  using SizeFn = std::function<int64_t(const Write&)>;

  CommitLog(GroupCommitOptions options, const time::Clock* clock, WriteFn write_fn, SizeFn size_fn)
      : size_fn_(std::move(size_fn)),
        engine_(
            std::move(options), clock,
            [this, write_fn = std::move(write_fn)](std::vector<Entry>& batch) {
              std::vector<const Write*> writes;
              writes.reserve(batch.size());
              for (const Entry& e : batch) writes.push_back(&e.write);
              return engine_.WriteDurably([&] { return write_fn(writes); });
            },
            [](Entry& e, const absl::Status& outcome) { e.done(outcome); }) {}

  // `done` runs on the completion thread once `write` is durable (or failed). An empty write is
  // a barrier: done runs after every earlier write is durable.
  void Submit(Write write, std::function<void(absl::Status)> done) {
    const int64_t bytes = size_fn_(write);
    absl::Status s = engine_.Submit(Entry{std::move(write), done}, bytes, Admission::kAlways);
    if (!s.ok()) done(std::move(s));  // stopped or failed: nothing will be written
  }

  // See GroupCommit::health and GroupCommit::failure.
  absl::Status health() const { return engine_.health(); }
  absl::Status failure() const { return engine_.failure(); }

 private:
  struct Entry {
    Write write;
    std::function<void(absl::Status)> done;
  };

  const SizeFn size_fn_;
  GroupCommit<Entry> engine_;  // last: drains before the rest is destroyed
};

}  // namespace conduit::commit
