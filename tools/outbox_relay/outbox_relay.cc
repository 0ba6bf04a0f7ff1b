#include "tools/outbox_relay/outbox_relay.h"

#include <algorithm>
#include <vector>

namespace conduit::outbox {

OutboxRelay::OutboxRelay(OutboxStore* store, EventPublisher* publisher, RelayObserver* observer,
                         const time::Clock* clock, OutboxRelayOptions options)
    : store_(store), publisher_(publisher), observer_(observer), clock_(clock), options_(options) {}

void OutboxRelay::LoseSession(const absl::Status& status) {
  observer_->OnError(status.ToString());
  store_->Reset();
  if (locked_) observer_->OnActive(false);
  locked_ = false;
}

OutboxRelay::Step OutboxRelay::RunOnce() {
  if (!locked_) {
    absl::StatusOr<bool> held = store_->TryLock();
    if (!held.ok()) {
      LoseSession(held.status());
      return Step::kFailed;
    }
    if (*held != locked_ || !reported_) observer_->OnActive(*held);
    reported_ = true;
    locked_ = *held;
    if (!locked_) return Step::kStandby;
  }

  absl::StatusOr<std::vector<OutboxRow>> rows = store_->ReadUnpublished(options_.batch);
  if (!rows.ok()) {
    LoseSession(rows.status());
    return Step::kFailed;
  }
  if (rows->empty()) {
    observer_->OnBacklogAge(absl::ZeroDuration());
    return Step::kIdle;
  }
  observer_->OnBacklogAge(
      std::max(absl::ZeroDuration(), clock_->Now() - rows->front().occurred_at));

  const std::vector<absl::Status> results = publisher_->Publish(*rows);
  // The acknowledged prefix: marking stops at the first row without an ack, so that
  // published_at advances in sequence order and a failed row goes out again before any later.
  std::vector<int64_t> acked;
  for (size_t i = 0; i < rows->size() && i < results.size() && results[i].ok(); ++i) {
    acked.push_back((*rows)[i].sequence);
  }
  if (!acked.empty()) {
    if (absl::Status s = store_->MarkPublished(acked); !s.ok()) {
      // Acknowledged but maybe not marked: the next relay publishes these again and the
      // dedup window drops them.
      LoseSession(s);
      return Step::kFailed;
    }
    observer_->OnPublished(static_cast<int64_t>(acked.size()));
  }
  if (acked.size() < rows->size()) {
    const absl::Status failed =
        acked.size() < results.size()
            ? results[acked.size()]
            : absl::InternalError("publisher answered fewer rows than sent");
    observer_->OnError(failed.ToString());
    return Step::kFailed;
  }
  return Step::kPublished;
}

void OutboxRelay::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    switch (RunOnce()) {
      case Step::kPublished:
        break;
      case Step::kIdle:
        if (absl::StatusOr<bool> woke = store_->WaitForInsert(options_.poll_interval); !woke.ok()) {
          LoseSession(woke.status());
          Sleep(options_.error_backoff);
        }
        break;
      case Step::kStandby:
        Sleep(options_.standby_retry);
        break;
      case Step::kFailed:
        Sleep(options_.error_backoff);
        break;
    }
  }
  if (locked_) observer_->OnActive(false);
}

bool OutboxRelay::Sleep(absl::Duration d) {
  const absl::Duration deadline = clock_->Monotonic() + d;
  absl::MutexLock lock(&mu_);
  while (!stopping_ && clock_->Monotonic() < deadline) clock_->WaitUntil(&stop_cv_, &mu_, deadline);
  return !stopping_;
}

void OutboxRelay::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    stop_cv_.SignalAll();
  }
  store_->Interrupt();
}

}  // namespace conduit::outbox
