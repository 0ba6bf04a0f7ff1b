#pragma once

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "tools/outbox_relay/outbox_store.h"

namespace conduit::outbox {

struct OutboxRelayOptions {
  int batch = 500;  // rows read, published and marked per round
  // Longest wait for a notification before the table is read again (the polling fallback:
  // a NOTIFY lost with a dropped session, or rows inserted without the trigger).
  absl::Duration poll_interval = absl::Seconds(1);
  // How often a standby (another session holds the lock) tries to take the lock.
  absl::Duration standby_retry = absl::Seconds(1);
  // Wait after a database or publish error before the next round.
  absl::Duration error_backoff = absl::Milliseconds(200);
};

// The relay loop: reads the outbox's unpublished rows in sequence order, publishes them, and
// marks them published only after the broker acknowledged them, so that a crash anywhere loses
// nothing: a row not yet marked is published again by the next relay, and the topic's dedup
// window (by event id) drops the repeat.
//
// Rules of a round (RunOnce):
//  - Only the holder of the advisory lock reads or publishes; a relay that cannot take it is a
//    standby and tries again every standby_retry. A lost session loses the lock, so every
//    database error drops the session and the lock must be taken again before the next read.
//  - Of a published batch, the acknowledged prefix (up to the first failed row) is marked, in
//    one statement; the rows from the first failure on stay unpublished and go out again next
//    round, after error_backoff. So published_at advances in sequence order.
//  - An empty read waits for a notification, at most poll_interval.
//
// Owns nothing it is given (store, publisher, observer and clock outlive it). RunOnce is called
// from one thread (Run's); Stop is thread-safe.
class OutboxRelay {
 public:
  enum class Step {
    kPublished,  // rows were published and marked: run again at once
    kIdle,       // nothing to publish: wait for a notification or poll_interval
    kStandby,    // another session holds the lock: wait standby_retry
    kFailed,     // a database or publish error: wait error_backoff
  };

  OutboxRelay(OutboxStore* store, EventPublisher* publisher, RelayObserver* observer,
              const time::Clock* clock, OutboxRelayOptions options);

  // One round of the rules above; what to wait for before the next.
  Step RunOnce();

  // Runs rounds, waiting between them as RunOnce says, until Stop. The round in progress when
  // Stop is called finishes first (its publish is answered and marked).
  void Run();

  // Makes Run return after its current round. Thread-safe.
  void Stop();

  bool active() const { return locked_; }

 private:
  // Drops the session (and so the lock) after a database error.
  void LoseSession(const absl::Status& status);
  // Waits `d` on the clock or until Stop; false once stopping.
  bool Sleep(absl::Duration d);

  OutboxStore* const store_;
  EventPublisher* const publisher_;
  RelayObserver* const observer_;
  const time::Clock* const clock_;
  const OutboxRelayOptions options_;
  bool locked_ = false;    // this relay's session holds the advisory lock
  bool reported_ = false;  // observer told of locked_ at least once

  absl::Mutex mu_;
  absl::CondVar stop_cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace conduit::outbox
