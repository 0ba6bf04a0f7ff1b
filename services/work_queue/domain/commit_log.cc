#include "services/work_queue/domain/commit_log.h"

#include "absl/strings/str_cat.h"

namespace conduit::work_queue {

CommitLog::CommitLog(QueueStore* store) : store_(store), thread_([this] { Loop(); }) {}

CommitLog::~CommitLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void CommitLog::Submit(QueueWrite write, std::function<void(absl::Status)> done) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(Entry{std::move(write), std::move(done)});
}

absl::Status CommitLog::health() {
  absl::MutexLock lock(&mu_);
  return failed_;
}

void CommitLog::Loop() {
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
      std::vector<const QueueWrite*> writes;
      for (const Entry& e : batch) writes.push_back(&e.write);
      absl::Status s = store_->Write(writes);
      if (!s.ok()) {
        failed = absl::UnavailableError(absl::StrCat(
            "storage write failed (", s.message(), "); the queue service needs a restart"));
        absl::MutexLock lock(&mu_);
        failed_ = failed;
      }
    }
    for (Entry& e : batch) e.done(failed);
  }
}

}  // namespace conduit::work_queue
