#include "common/security/quota.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::security {

absl::string_view QuotaKindName(QuotaKind kind) {
  switch (kind) {
    case QuotaKind::kProduceBytes:
      return "produce_bytes";
    case QuotaKind::kFetchBytes:
      return "fetch_bytes";
    case QuotaKind::kRequests:
      return "requests";
  }
  return "unknown";
}

double QuotaRates::Of(QuotaKind kind) const {
  switch (kind) {
    case QuotaKind::kProduceBytes:
      return produce_bytes;
    case QuotaKind::kFetchBytes:
      return fetch_bytes;
    case QuotaKind::kRequests:
      return requests;
  }
  return 0;
}

QuotaBook::Verdict QuotaBook::Charge(absl::string_view principal, QuotaKind kind, double amount) {
  const double rate = rates_.Of(kind);
  if (rate <= 0 || amount <= 0) return Verdict{};
  Verdict verdict;
  std::shared_ptr<QuotaObserver> observer;
  {
    absl::MutexLock lock(&mu_);
    observer = observer_;
    Bucket& b = Refill(principal, kind, rate);
    const double needed =
        std::min(amount, rate);  // a request over a whole bucket waits for a full one
    if (b.tokens >= needed) {
      b.tokens -= amount;  // may go below zero: the excess is paid back before the next request
    } else {
      verdict = Verdict{false, absl::Milliseconds(std::ceil((needed - b.tokens) / rate * 1000))};
    }
  }
  if (observer != nullptr) {
    if (verdict.allowed) {
      observer->OnUsed(principal, kind, amount);
    } else {
      observer->OnThrottled(principal, kind, verdict.retry_after);
    }
  }
  return verdict;
}

void QuotaBook::Debit(absl::string_view principal, QuotaKind kind, double amount) {
  const double rate = rates_.Of(kind);
  if (rate <= 0 || amount <= 0) return;
  std::shared_ptr<QuotaObserver> observer;
  {
    absl::MutexLock lock(&mu_);
    observer = observer_;
    Refill(principal, kind, rate).tokens -= amount;
  }
  if (observer != nullptr) observer->OnUsed(principal, kind, amount);
}

void QuotaBook::SetObserver(std::shared_ptr<QuotaObserver> observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

size_t QuotaBook::buckets() const {
  absl::MutexLock lock(&mu_);
  return buckets_.size();
}

void QuotaBook::ForgetFull(absl::Duration now) {
  absl::erase_if(buckets_, [now](const auto& entry) {
    const Bucket& b = entry.second;
    return b.tokens + b.rate * absl::ToDoubleSeconds(now - b.refilled_at) >= b.rate;
  });
  sweep_at_ = std::max(kFirstSweep, 2 * buckets_.size());
}

QuotaBook::Bucket& QuotaBook::Refill(absl::string_view principal, QuotaKind kind, double rate) {
  const absl::Duration now = clock_->Monotonic();
  std::string key = absl::StrCat(principal, "\n", static_cast<int>(kind));
  if (buckets_.size() >= sweep_at_ && !buckets_.contains(key)) ForgetFull(now);
  auto [it, added] = buckets_.try_emplace(std::move(key), Bucket{rate, now, rate});
  Bucket& b = it->second;
  b.tokens = std::min(rate, b.tokens + rate * absl::ToDoubleSeconds(now - b.refilled_at));
  b.refilled_at = now;
  return b;
}

absl::Status QuotaBook::Refusal(absl::string_view principal, QuotaKind kind,
                                const Verdict& verdict) const {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s is over its %s quota (%.0f/s); retry after %dms", principal, QuotaKindName(kind),
      rates_.Of(kind), absl::ToInt64Milliseconds(verdict.retry_after)));
}

}  // namespace conduit::security
