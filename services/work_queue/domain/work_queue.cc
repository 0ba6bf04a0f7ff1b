#include "services/work_queue/domain/work_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/work_queue/domain/queue_rules.h"

namespace conduit::work_queue {
namespace {

absl::Status NotFound(const std::string& what) { return absl::NotFoundError(what); }

}  // namespace

WorkQueue::WorkQueue(QueueStore* store, runtime::Runtime* runtime, WorkQueueOptions options,
                     QueueObserver* observer)
    : store_(store),
      clock_(runtime->clock()),
      options_(options),
      observer_(observer ? observer : &default_observer_),
      log_(
          {.service = "queue", .space_check = [store] { return store->CheckSpace(); }}, clock_,
          [this, store](const std::vector<const QueueWrite*>& writes) {
            absl::Status s = store->Write(writes);
            if (s.ok() && std::none_of(writes.begin(), writes.end(),
                                       [](const QueueWrite* w) { return w->sync; })) {
              interval_sync_.Mark();
            }
            return s;
          },
          &QueueWrite::ApproxBytes),
      scope_(runtime, runtime::Pool::kStorage) {}

WorkQueue::~WorkQueue() {
  shutting_down_.store(true);  // long-polls answer at once instead of waiting again
  scope_.StopEvery(scheduler_);
  interval_sync_.Stop();
}

absl::Time WorkQueue::Now() const {
  return absl::FromUnixMicros(absl::ToUnixMicros(clock_->Now()));
}

absl::Status WorkQueue::Recover() {
  auto queues = store_->LoadQueues();
  if (!queues.ok()) return queues.status();
  auto next_id = store_->LoadNextJobId();
  if (!next_id.ok()) return next_id.status();
  const absl::Time now = Now();
  {
    absl::MutexLock lock(&mu_);
    next_job_id_ = std::max<uint64_t>(1, *next_id);
    for (const QueueMeta& meta : *queues) {
      auto q = std::make_unique<JobQueue>(meta, store_, observer_, &scope_);
      CONDUIT_RETURN_IF_ERROR(q->Recover(now, &next_job_id_));
      next_queue_id_ = std::max(next_queue_id_, meta.id.value() + 1);
      interval_sync_.Request(meta.config);
      queues_.Add(std::move(q));
    }
  }
  if (options_.scheduler_interval > absl::ZeroDuration()) {
    scheduler_ = scope_.Every(options_.scheduler_interval, [this] { RunScheduler(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<JobQueue*> WorkQueue::Find(const std::string& name) const {
  JobQueue* q = queues_.Find(name);
  if (q == nullptr) return NotFound(absl::StrCat("queue '", name, "' does not exist"));
  return q;
}

absl::StatusOr<JobQueue*> WorkQueue::FindForChange(const std::string& name) {
  CONDUIT_RETURN_IF_ERROR(log_.health());
  return Find(name);
}

void WorkQueue::Commit(QueueWrite write, std::function<void(absl::Status)> done) {
  JobQueue* q = queues_.FindById(write.queue_id);
  // A kInterval queue's changes are answered without an fsync of their own; its creation is.
  if (q != nullptr && !write.create_queue &&
      q->meta().config.durability == QueueDurability::kInterval) {
    write.sync = false;
  }
  // Records written or deleted stay readable from memory until the store has them.
  if (q == nullptr || (write.puts.empty() && write.deletes.empty())) {
    return log_.Submit(std::move(write), std::move(done));
  }
  const uint64_t seq = ++commit_seq_;
  std::vector<uint64_t> ids = q->records().NotePending(seq, write.puts, write.deletes);
  log_.Submit(std::move(write), [this, queue_id = q->id(), seq, ids = std::move(ids),
                                 done = std::move(done)](absl::Status s) {
    if (s.ok()) {  // after a failure memory keeps what the store may not have
      absl::MutexLock lock(&mu_);
      if (JobQueue* q = queues_.FindById(queue_id)) q->records().ClearPending(seq, ids);
    }
    done(std::move(s));
  });
}

// --- queues ----------------------------------------------------------------------------------

void WorkQueue::CreateQueue(const std::string& name, const QueueConfigPatch& patch,
                            Callback<QueueMeta> done) {
  if (auto s = ValidateQueueName(name); !s.ok()) return done(s);
  const QueueConfig config = patch.ApplyTo(QueueConfig{});
  if (auto s = ValidateConfig(config); !s.ok()) return done(s);
  absl::MutexLock lock(&mu_);
  if (auto s = log_.health(); !s.ok()) return ReplyAfterLog(std::move(done), s);
  if (queues_.Find(name) != nullptr) {
    return ReplyAfterLog(std::move(done), absl::AlreadyExistsError(
                                              absl::StrCat("queue '", name, "' already exists")));
  }
  const QueueMeta meta{QueueId(next_queue_id_++), name, config, Now()};
  QueueWrite write{.queue_id = meta.id};
  write.create_queue = meta;
  queues_.Add(std::make_unique<JobQueue>(meta, store_, observer_, &scope_));
  interval_sync_.Request(config);
  CommitAndReply(&write, std::move(done), meta);
}

void WorkQueue::DeleteQueue(const std::string& name, Callback<bool> done) {
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(name);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  write.drop_queue = true;
  (*q)->WakeWaiters();
  observer_->OnQueueDeleted(name);
  queues_.Remove(name);
  CommitAndReply(&write, std::move(done), true);
}

std::vector<QueueMeta> WorkQueue::ListQueues() const {
  absl::MutexLock lock(&mu_);
  std::vector<QueueMeta> out;
  for (const auto& [name, q] : queues_) out.push_back(q->meta());
  return out;
}

absl::StatusOr<QueueStats> WorkQueue::Stats(const std::string& queue) const {
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(const JobQueue* q, Find(queue));
  return q->Stats(Now());
}

// --- scheduler -------------------------------------------------------------------------------

void WorkQueue::RunScheduler() {
  absl::MutexLock lock(&mu_);
  if (!log_.health().ok()) return;  // memory must not move on from what the disk has
  const absl::Time now = Now();
  for (auto& [name, q] : queues_) {
    QueueWrite write{.queue_id = q->id()};
    q->RunDue(now, rng_, &write);
    q->ExpireKeys(now, &write);
    q->ObserveTenants();
    if (!write.puts.empty() || !write.key_deletes.empty()) {
      Commit(std::move(write), [](absl::Status) {});
    }
  }
}

}  // namespace conduit::work_queue
