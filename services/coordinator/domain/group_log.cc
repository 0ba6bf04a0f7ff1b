#include "services/coordinator/domain/group_log.h"

#include <utility>

namespace conduit::coordinator {

void GroupLog::Outcome::Finish(absl::Status s) {
  std::function<void(absl::Status)> then;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    status_ = s;
    then = std::move(then_);
  }
  if (then) then(std::move(s));
}

GroupLog::GroupLog(CoordinatorStore* store, const time::Clock* clock)
    : log_(
          {.service = "coordinator", .space_check = [store] { return store->CheckSpace(); }}, clock,
          [store](const std::vector<const CoordinatorWrite*>& writes) {
            return store->Write(writes);
          },
          &CoordinatorWrite::ApproxBytes) {}

GroupLog::OutcomePtr GroupLog::Submit(CoordinatorWrite write,
                                      std::shared_ptr<std::atomic<int>> inflight) {
  auto outcome = std::make_shared<Outcome>();
  if (inflight != nullptr) inflight->fetch_add(1);
  // The counter's owner outlives the write: the callback holds it.
  log_.Submit(std::move(write), [outcome, inflight = std::move(inflight)](absl::Status s) {
    if (inflight != nullptr) inflight->fetch_sub(1);
    outcome->Finish(std::move(s));
  });
  return outcome;
}

absl::Status GroupLog::Wait(const OutcomePtr& outcome) {
  if (!outcome) return absl::OkStatus();
  absl::MutexLock lock(&outcome->mu_);
  outcome->mu_.Await(absl::Condition(&outcome->done_));
  return outcome->status_;
}

void GroupLog::Then(const OutcomePtr& outcome, std::function<void(absl::Status)> fn) {
  if (!outcome) return fn(absl::OkStatus());
  absl::Status status;
  {
    absl::MutexLock lock(&outcome->mu_);
    if (!outcome->done_) {
      outcome->then_ = std::move(fn);
      return;
    }
    status = outcome->status_;
  }
  fn(std::move(status));
}

}  // namespace conduit::coordinator
