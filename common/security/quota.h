#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace conduit::security {

// What a quota limits, per principal.
enum class QuotaKind { kProduceBytes, kFetchBytes, kRequests };
absl::string_view QuotaKindName(QuotaKind kind);

// Rates per second for each kind; 0: no limit. One set for every principal (Kafka's default
// client quota), the same on every broker.
struct QuotaRates {
  double produce_bytes = 0;
  double fetch_bytes = 0;
  double requests = 0;
  double Of(QuotaKind kind) const;
};

// Told what a QuotaBook takes and refuses, for metrics (common/grpc/quota_metrics.h exports them
// to Prometheus; this library knows no Prometheus). Only kinds with a rate set are observed.
// Called on the charging thread, outside the book's lock: implementations are thread-safe and
// quick (a counter bump), and must not call back into the book.
class QuotaObserver {
 public:
  virtual ~QuotaObserver() = default;
  // `amount` of `kind` was taken from `principal`'s bucket: a Charge let through, or a Debit.
  virtual void OnUsed(absl::string_view principal, QuotaKind kind, double amount) = 0;
  // A Charge was refused and the caller told to retry after `retry_after`.
  virtual void OnThrottled(absl::string_view principal, QuotaKind kind,
                           absl::Duration retry_after) = 0;
};

// Token buckets per (principal, kind), each holding at most one second of its rate: a principal
// may burst up to a second's worth, then is held to the rate. Charge takes `amount` from the
// bucket when the bucket holds it, else takes nothing and says how long until it will
// (RESOURCE_EXHAUSTED, with the wait, for gRFC A6's grpc-retry-pushback-ms). One principal's use
// never touches another's bucket. An amount larger than a whole bucket is let through once the
// bucket is full (and empties it), so a large request is slowed, never refused forever.
//
// Memory: a bucket that has refilled to full is the same as no bucket, so full buckets are
// forgotten whenever the book has doubled since it last looked (from 1024 on): a flood of
// distinct principals (JWT subjects, say) costs memory for the last second's callers and those
// in debt, not for every principal ever seen.
//
// Time comes from the injected clock's monotonic reading. Thread-safe; the observer (if any) is
// told of every charge, debit and refusal.
class QuotaBook {
 public:
  QuotaBook(QuotaRates rates, const time::Clock* clock) : rates_(rates), clock_(clock) {}

  struct Verdict {
    bool allowed = true;
    absl::Duration retry_after = absl::ZeroDuration();  // when refused
  };
  Verdict Charge(absl::string_view principal, QuotaKind kind, double amount);
  // Takes `amount` whatever the bucket holds (it may go below zero): for use measured after the
  // fact (a fetch's answer), paid back before the principal's next Charge of that kind passes.
  void Debit(absl::string_view principal, QuotaKind kind, double amount);

  // RESOURCE_EXHAUSTED naming the principal, kind and rate, for a refused verdict.
  absl::Status Refusal(absl::string_view principal, QuotaKind kind, const Verdict& verdict) const;

  const QuotaRates& rates() const { return rates_; }

  // Sets (or, with null, removes) the observer told of later charges, debits and refusals; set
  // it before the book is used so that no decision goes unobserved. The book shares ownership.
  void SetObserver(std::shared_ptr<QuotaObserver> observer);

  // The buckets held now (for tests and the memory bound above).
  size_t buckets() const;

 private:
  static constexpr size_t kFirstSweep = 1024;
  struct Bucket {
    double tokens = 0;
    absl::Duration refilled_at;
    double rate = 0;
  };
  // The refilled bucket of (principal, kind) at `rate`.
  Bucket& Refill(absl::string_view principal, QuotaKind kind, double rate)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the buckets that are full at `now`.
  void ForgetFull(absl::Duration now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const QuotaRates rates_;
  const time::Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);  // principal + kind
  size_t sweep_at_ ABSL_GUARDED_BY(mu_) = kFirstSweep;  // ForgetFull when buckets_ passes it
  std::shared_ptr<QuotaObserver> observer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security
