#include "common/runtime/runtime.h"

#include <algorithm>

namespace conduit::runtime {

// ---- Scheduler ----

Scheduler::Scheduler(const time::Clock* clock) : clock_(clock), thread_([this] { Loop(); }) {}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  thread_.join();
}

Scheduler::TimerId Scheduler::Add(const void* owner, absl::Duration deadline,
                                  std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  const TimerId id = next_id_++;
  const bool is_first = timers_.empty() || deadline < timers_.begin()->first.first;
  timers_.emplace(std::make_pair(deadline, id), Timer{owner, std::move(fn)});
  deadlines_.emplace(id, deadline);
  if (is_first) wake_.Signal();
  return id;
}

bool Scheduler::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return false;
  timers_.erase(std::make_pair(it->second, id));
  deadlines_.erase(it);
  return true;
}

std::vector<std::function<void()>> Scheduler::Detach(const void* owner) {
  std::vector<std::function<void()>> removed;
  absl::MutexLock lock(&mu_);
  for (auto it = timers_.begin(); it != timers_.end();) {
    if (it->second.owner != owner) {
      ++it;
      continue;
    }
    deadlines_.erase(it->first.second);
    removed.push_back(std::move(it->second.fn));
    it = timers_.erase(it);
  }
  struct Args {
    Scheduler* s;
    const void* owner;
  } args{this, owner};
  mu_.Await(absl::Condition(
      +[](Args* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(a->s->mu_) { return a->s->running_ != a->owner; },
      &args));
  return removed;
}

void Scheduler::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) break;
    if (timers_.empty()) {
      wake_.Wait(&mu_);
      continue;
    }
    const absl::Duration next = timers_.begin()->first.first;
    if (clock_->Monotonic() < next) {
      clock_->WaitUntil(&wake_, &mu_, next);
      continue;
    }
    auto node = timers_.extract(timers_.begin());
    deadlines_.erase(node.key().second);
    running_ = node.mapped().owner;
    mu_.Unlock();
    node.mapped().fn();
    mu_.Lock();
    running_ = nullptr;
  }
  // Every Scope has detached its timers by now; run anything left so nobody waits forever.
  while (!timers_.empty()) {
    auto node = timers_.extract(timers_.begin());
    deadlines_.erase(node.key().second);
    mu_.Unlock();
    node.mapped().fn();
    mu_.Lock();
  }
}

// ---- Runtime ----

Runtime::Runtime(const time::Clock* clock, RuntimeOptions options)
    : clock_(clock),
      storage_("storage", options.storage_threads, options.max_queued_tasks),
      remote_("remote", options.remote_threads, options.max_queued_tasks),
      scheduler_(clock) {}

// ---- Scope ----

namespace internal {

struct Periodic {
  absl::Duration interval;
  std::function<void()> work;
  // The rest is guarded by the owning ScopeState's mu.
  absl::Duration next;   // monotonic time of the next run
  uint64_t timer = 0;    // the armed timer, 0 when none
  bool running = false;  // a run is queued or running on the pool
  bool stopped = false;
  int64_t runs = 0;
};

// A Scope's state, shared with its queued tasks and armed timers so that none of them touches
// freed memory, whatever the order in which they finish.
struct ScopeState : std::enable_shared_from_this<ScopeState> {
  ScopeState(Runtime* runtime, Pool pool_kind, size_t max)
      : clock(runtime->clock()),
        scheduler(runtime->scheduler()),
        pool(runtime->pool(pool_kind)),
        max_tasks(max) {}

  bool Submit(std::function<void()> task) {
    {
      absl::MutexLock lock(&mu);
      if (tasks >= max_tasks) return false;
      ++tasks;
      ++in_flight;
    }
    auto self = shared_from_this();
    if (pool->TrySubmit([self, task = std::move(task)] {
          task();
          self->TaskDone();
        })) {
      return true;
    }
    TaskDone();
    return false;
  }

  void TaskDone() {
    absl::MutexLock lock(&mu);
    --tasks;
    --in_flight;
  }

  uint64_t After(absl::Duration delay, std::function<void()> fn) {
    const absl::Duration deadline = clock->Monotonic() + std::max(delay, absl::ZeroDuration());
    absl::MutexLock lock(&mu);
    if (draining) {
      pending.push_back(std::move(fn));
      return 0;
    }
    return scheduler->Add(this, deadline, std::move(fn));
  }

  bool Cancel(uint64_t id) { return scheduler->Cancel(id); }

  uint64_t Every(absl::Duration interval, std::function<void()> work) {
    auto p = std::make_shared<Periodic>();
    p->interval = interval;
    p->work = std::move(work);
    p->next = clock->Monotonic() + interval;
    absl::MutexLock lock(&mu);
    const uint64_t id = next_periodic++;
    periodics.emplace(id, p);
    if (!draining) Arm(p);
    return id;
  }

  void Arm(const std::shared_ptr<Periodic>& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    p->timer = scheduler->Add(this, p->next, [self = shared_from_this(), p] { self->Tick(p); });
  }

  // On the timer thread: hands the run to the pool.
  void Tick(const std::shared_ptr<Periodic>& p) {
    {
      absl::MutexLock lock(&mu);
      p->timer = 0;
      if (p->stopped || draining) return;
      p->running = true;
      ++in_flight;
    }
    auto self = shared_from_this();
    if (pool->TrySubmit([self, p] { self->Run(p); })) return;
    absl::MutexLock lock(&mu);  // the pool is full: try again an interval later
    p->running = false;
    --in_flight;
    p->next = clock->Monotonic() + p->interval;
    if (!p->stopped && !draining) Arm(p);
  }

  void Run(const std::shared_ptr<Periodic>& p) {
    p->work();
    absl::MutexLock lock(&mu);
    p->running = false;
    ++p->runs;
    --in_flight;
    // On the schedule, not from the end of the run: time that passed during a run counts.
    p->next = std::max(p->next + p->interval, clock->Monotonic());
    if (!p->stopped && !draining) Arm(p);
  }

  void StopLocked(Periodic& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    p.stopped = true;
    if (p.timer != 0) scheduler->Cancel(p.timer);
    p.timer = 0;
  }

  void StopEvery(uint64_t id) {
    absl::MutexLock lock(&mu);
    auto it = periodics.find(id);
    if (it == periodics.end()) return;
    std::shared_ptr<Periodic> p = it->second;
    StopLocked(*p);
    mu.Await(absl::Condition(
        +[](Periodic* q) { return !q->running; }, p.get()));  // mu is held: q is guarded by it
    periodics.erase(id);
  }

  int64_t Runs(uint64_t id) {
    absl::MutexLock lock(&mu);
    auto it = periodics.find(id);
    return it == periodics.end() ? 0 : it->second->runs;
  }

  void Drain() {
    {
      absl::MutexLock lock(&mu);
      draining = true;
      for (auto& [id, p] : periodics) StopLocked(*p);
    }
    std::vector<std::function<void()>> due = scheduler->Detach(this);
    while (true) {
      for (auto& fn : due) fn();
      due.clear();
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](ScopeState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
            return s->in_flight == 0 || !s->pending.empty();
          },
          this));
      if (pending.empty()) return;
      due.swap(pending);
    }
  }

  const time::Clock* const clock;
  Scheduler* const scheduler;
  executor::BoundedExecutor* const pool;
  const size_t max_tasks;

  absl::Mutex mu ABSL_ACQUIRED_BEFORE(scheduler->mu_);
  bool draining ABSL_GUARDED_BY(mu) = false;
  size_t tasks ABSL_GUARDED_BY(mu) = 0;      // Submit tasks queued or running
  size_t in_flight ABSL_GUARDED_BY(mu) = 0;  // those and periodic runs queued or running
  std::vector<std::function<void()>> pending ABSL_GUARDED_BY(mu);  // timers added while draining
  uint64_t next_periodic ABSL_GUARDED_BY(mu) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Periodic>> periodics ABSL_GUARDED_BY(mu);
};

}  // namespace internal

Scope::Scope(Runtime* runtime, Pool pool, size_t max_tasks)
    : state_(std::make_shared<internal::ScopeState>(runtime, pool, max_tasks)) {}

Scope::~Scope() { state_->Drain(); }

const time::Clock* Scope::clock() const { return state_->clock; }

bool Scope::Submit(std::function<void()> task) { return state_->Submit(std::move(task)); }

Scope::TimerId Scope::After(absl::Duration delay, std::function<void()> fn) {
  return state_->After(delay, std::move(fn));
}

bool Scope::Cancel(TimerId id) { return id != 0 && state_->Cancel(id); }

Scope::PeriodicId Scope::Every(absl::Duration interval, std::function<void()> work) {
  return state_->Every(interval, std::move(work));
}

void Scope::StopEvery(PeriodicId id) { state_->StopEvery(id); }

int64_t Scope::runs(PeriodicId id) const { return state_->Runs(id); }

}  // namespace conduit::runtime
