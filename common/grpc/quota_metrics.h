#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/quota.h"

namespace conduit::grpc_util {

// The per-principal quotas (security::QuotaBook) as Prometheus counters, labelled
// {principal, kind} with kind produce_bytes, fetch_bytes or requests (only kinds with a rate):
//   conduit_quota_used_total               what the buckets took: bytes (produce_bytes,
//                                          fetch_bytes) or calls (requests); fetches are taken
//                                          after the fact (one byte up front, then the answer)
//   conduit_quota_throttled_total          charges refused over the quota: calls answered
//                                          RESOURCE_EXHAUSTED, and pauses of a LogService.Tail
//   conduit_quota_throttle_seconds_total   the sum of the waits handed out with them
//                                          (grpc-retry-pushback-ms, or the Tail's pause)
// Cardinality is bounded: the first `max_principals` distinct principals of each kind get their
// own series; every later one is counted under principal="other" (a principal always has a
// type, `User:...`, so "other" names no caller). Principals are usually configured identities
// (token file, certificates), but JWT subjects are whatever the issuer signs; at most
// 3 kinds × (max_principals + 1) × 3 series. Series stay for the life of the process.
//
// Set once on the QuotaBook (QuotaBook::SetObserver) before the server serves. Keeps the
// registry alive. Thread-safe.
class QuotaMetrics final : public security::QuotaObserver {
 public:
  static constexpr size_t kMaxPrincipals = 1000;
  static constexpr absl::string_view kOtherPrincipal = "other";

  explicit QuotaMetrics(std::shared_ptr<prometheus::Registry> registry,
                        size_t max_principals = kMaxPrincipals);

  void OnUsed(absl::string_view principal, security::QuotaKind kind, double amount) override;
  void OnThrottled(absl::string_view principal, security::QuotaKind kind,
                   absl::Duration retry_after) override;

 private:
  struct Series {
    prometheus::Counter* used;
    prometheus::Counter* throttled;
    prometheus::Counter* throttle_seconds;
  };
  static constexpr size_t kKinds = 3;
  static_assert(static_cast<size_t>(security::QuotaKind::kRequests) + 1 == kKinds,
                "one map of series per QuotaKind");

  // The series of (principal, kind), made on first use; "other"'s beyond the cap. A copy: the
  // map's entries move when it grows.
  Series Of(absl::string_view principal, security::QuotaKind kind);

  const std::shared_ptr<prometheus::Registry> registry_;  // owns the families
  const size_t max_principals_;
  prometheus::Family<prometheus::Counter>& used_;
  prometheus::Family<prometheus::Counter>& throttled_;
  prometheus::Family<prometheus::Counter>& throttle_seconds_;
  absl::Mutex mu_;
  // Per kind: principal → its series (prometheus-cpp's Family::Add allocates on every call, so
  // the hot path looks series up here). Entries are never removed; the counters live in the
  // families, so pointers to them stay valid.
  std::array<absl::flat_hash_map<std::string, Series>, kKinds> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::grpc_util
