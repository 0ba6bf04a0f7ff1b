#include "common/grpc/quota_metrics.h"

#include <map>
#include <utility>

namespace conduit::grpc_util {

QuotaMetrics::QuotaMetrics(std::shared_ptr<prometheus::Registry> registry, size_t max_principals)
    : registry_(std::move(registry)),
      max_principals_(max_principals),
      used_(prometheus::BuildCounter()
                .Name("conduit_quota_used_total")
                .Help("Taken from a principal's quota bucket: bytes, or calls for kind requests")
                .Register(*registry_)),
      throttled_(prometheus::BuildCounter()
                     .Name("conduit_quota_throttled_total")
                     .Help("Charges refused over a principal's quota (RESOURCE_EXHAUSTED answers "
                           "and Tail pauses)")
                     .Register(*registry_)),
      throttle_seconds_(prometheus::BuildCounter()
                            .Name("conduit_quota_throttle_seconds_total")
                            .Help("Sum of the waits handed out to a principal over its quota")
                            .Register(*registry_)) {}

void QuotaMetrics::OnUsed(absl::string_view principal, security::QuotaKind kind, double amount) {
  Of(principal, kind).used->Increment(amount);
}

void QuotaMetrics::OnThrottled(absl::string_view principal, security::QuotaKind kind,
                               absl::Duration retry_after) {
  const Series series = Of(principal, kind);
  series.throttled->Increment();
  series.throttle_seconds->Increment(absl::ToDoubleSeconds(retry_after));
}

QuotaMetrics::Series QuotaMetrics::Of(absl::string_view principal, security::QuotaKind kind) {
  absl::MutexLock lock(&mu_);
  auto& by_principal = series_[static_cast<size_t>(kind)];
  if (auto it = by_principal.find(principal); it != by_principal.end()) return it->second;
  if (by_principal.size() >= max_principals_) principal = kOtherPrincipal;
  auto [it, added] = by_principal.try_emplace(principal);
  if (added) {
    const std::map<std::string, std::string> labels = {
        {"principal", std::string(principal)},
        {"kind", std::string(security::QuotaKindName(kind))}};
    it->second =
        Series{&used_.Add(labels), &throttled_.Add(labels), &throttle_seconds_.Add(labels)};
  }
  return it->second;
}

}  // namespace conduit::grpc_util
