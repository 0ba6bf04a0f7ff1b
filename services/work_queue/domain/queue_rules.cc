#include "services/work_queue/domain/queue_rules.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/backoff/backoff.h"

namespace conduit::work_queue {

QueueConfig QueueConfigPatch::ApplyTo(QueueConfig base) const {
  if (durability) base.durability = *durability;
  if (flush_interval) base.flush_interval = *flush_interval;
  if (visibility_timeout) base.visibility_timeout = *visibility_timeout;
  if (max_attempts) base.max_attempts = *max_attempts;
  if (max_lease_expiries) base.max_lease_expiries = *max_lease_expiries;
  if (backoff_initial) base.backoff_initial = *backoff_initial;
  if (backoff_multiplier) base.backoff_multiplier = *backoff_multiplier;
  if (backoff_max) base.backoff_max = *backoff_max;
  if (idempotency_window) base.idempotency_window = *idempotency_window;
  if (max_depth) base.max_depth = *max_depth;
  if (max_redrives) base.max_redrives = *max_redrives;
  if (max_ready_age) base.max_ready_age = *max_ready_age;
  if (tenant_weights) base.tenant_weights = *tenant_weights;
  if (max_in_flight_per_tenant) base.max_in_flight_per_tenant = *max_in_flight_per_tenant;
  return base;
}

absl::Status ValidateQueueName(absl::string_view name) {
  if (name.empty() || name.size() > 249) {
    return absl::InvalidArgumentError(
        absl::StrCat("queue name must be 1..249 characters, got ", name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("queue name '", name, "' may only contain [a-zA-Z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const QueueConfig& c) {
  auto invalid = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.durability != QueueDurability::kSync && c.durability != QueueDurability::kInterval) {
    return invalid("durability must be SYNC or INTERVAL");
  }
  if (c.flush_interval < kMinFlushInterval || c.flush_interval > kMaxFlushInterval) {
    return invalid("flush_interval must be between ", absl::FormatDuration(kMinFlushInterval),
                   " and ", absl::FormatDuration(kMaxFlushInterval), ", got ",
                   absl::FormatDuration(c.flush_interval));
  }
  if (c.visibility_timeout < absl::Seconds(1) || c.visibility_timeout > absl::Hours(12)) {
    return invalid("visibility_timeout must be between 1s and 12h, got ",
                   absl::FormatDuration(c.visibility_timeout));
  }
  if (c.max_attempts < 1 || c.max_attempts > 1000) {
    return invalid("max_attempts must be between 1 and 1000, got ", c.max_attempts);
  }
  if (c.max_lease_expiries < 1 || c.max_lease_expiries > 1000) {
    return invalid("max_lease_expiries must be between 1 and 1000, got ", c.max_lease_expiries);
  }
  if (c.backoff_initial < absl::ZeroDuration() || c.backoff_max < c.backoff_initial ||
      c.backoff_max > absl::Hours(24)) {
    return invalid("backoff must satisfy 0 <= backoff_initial <= backoff_max <= 24h");
  }
  if (!(c.backoff_multiplier >= 1.0 && c.backoff_multiplier <= 100.0)) {
    return invalid("backoff_multiplier must be between 1 and 100, got ", c.backoff_multiplier);
  }
  if (c.idempotency_window < absl::ZeroDuration() || c.idempotency_window > absl::Hours(24 * 7)) {
    return invalid("idempotency_window must be between 0 and 7 days");
  }
  if (c.max_depth < 0) return invalid("max_depth must be >= 0 (0: no limit)");
  if (c.max_redrives < 0) return invalid("max_redrives must be >= 0");
  if (c.max_ready_age < absl::ZeroDuration() || c.max_ready_age > kMaxReadyAge) {
    return invalid("max_ready_age must be between 0 and ", absl::FormatDuration(kMaxReadyAge),
                   " (0: no limit), got ", absl::FormatDuration(c.max_ready_age));
  }
  if (c.max_in_flight_per_tenant < 0) return invalid("max_in_flight_per_tenant must be >= 0");
  if (c.tenant_weights.size() > kMaxTenantWeights) {
    return invalid("tenant_weights has ", c.tenant_weights.size(), " tenants; the limit is ",
                   kMaxTenantWeights);
  }
  for (const auto& [tenant, weight] : c.tenant_weights) {
    if (tenant.size() > kMaxTenantBytes) {
      return invalid("tenant_weights: a tenant name is ", tenant.size(), " bytes; the limit is ",
                     kMaxTenantBytes);
    }
    if (weight < 1 || weight > 100) {
      return invalid("weight of tenant '", tenant, "' must be between 1 and 100, got ", weight);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSelection(const std::vector<uint64_t>& ids, bool has_filter, int32_t limit) {
  if (!ids.empty() && has_filter) {
    return absl::InvalidArgumentError(
        "give job_ids or a filter, not both (a filter would not narrow the ids)");
  }
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be >= 0 (0: no limit), got ", limit));
  }
  return absl::OkStatus();
}

absl::Status ValidateRedriveRate(double rate) {
  if (rate == 0 || (rate >= kMinRedriveRate && rate <= kMaxRedriveRate)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("rate must be 0 (all at once) or between ",
                                                 kMinRedriveRate, " and ", kMaxRedriveRate,
                                                 " jobs per second, got ", rate));
}

namespace {
backoff::Policy RetryPolicy(const QueueConfig& config) {
  return backoff::Policy{config.backoff_initial, config.backoff_multiplier, config.backoff_max};
}
}  // namespace

absl::Duration Backoff(const QueueConfig& config, int32_t failures, absl::BitGenRef rng) {
  return RetryPolicy(config).Jittered(failures, rng);
}

}  // namespace conduit::work_queue
