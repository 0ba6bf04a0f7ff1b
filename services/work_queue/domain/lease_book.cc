#include "services/work_queue/domain/lease_book.h"

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::work_queue {

void LeaseBook::Grant(Job& job, const std::string& worker, absl::Time now,
                      absl::Duration visibility, absl::BitGenRef rng) {
  job.state = JobState::kLeased;
  job.lease_deadline = now + visibility;
  job.lease_token = LeaseToken(absl::StrFormat("%x-%x-%016x", job.id, job.attempts.size() + 1,
                                               absl::Uniform<uint64_t>(rng)));
  Attempt attempt;
  attempt.number = static_cast<uint32_t>(job.attempts.size() + 1);
  attempt.worker = worker;
  attempt.leased_at = now;
  job.attempts.push_back(std::move(attempt));
}

absl::Status LeaseBook::Stale(uint64_t job_id) {
  return absl::FailedPreconditionError(absl::StrCat(
      "lease token for job ", job_id, " is stale: the job was redelivered or settled"));
}

absl::Status LeaseBook::Check(const Job& job, const LeaseToken& token, absl::Time now) {
  if (job.state != JobState::kLeased || job.lease_token != token) return Stale(job.id);
  if (job.lease_deadline <= now) {
    return absl::FailedPreconditionError(absl::StrCat("lease of job ", job.id, " expired at ",
                                                      absl::FormatTime(job.lease_deadline)));
  }
  return absl::OkStatus();
}

void LeaseBook::EndByExpiry(Job& job) {
  Attempt& attempt = job.attempts.back();
  attempt.ended_at = job.lease_deadline;
  attempt.outcome = Outcome::kExpired;
  attempt.reason = "lease expired";
  ++job.expiries;
  job.lease_token = LeaseToken();
}

void LeaseBook::EndByNack(Job& job, const std::string& reason, FailureClass failure_class,
                          absl::Time now) {
  Attempt& attempt = job.attempts.back();
  attempt.ended_at = now;
  attempt.outcome = Outcome::kNacked;
  attempt.reason = reason;
  attempt.failure_class = failure_class;
  ++job.failures;
  job.lease_token = LeaseToken();
}

void LeaseBook::Extend(Job& job, absl::Time deadline) {
  by_deadline_.erase({job.lease_deadline, job.id});
  job.lease_deadline = deadline;
  by_deadline_.emplace(job.lease_deadline, job.id);
}

std::optional<uint64_t> LeaseBook::FirstExpired(absl::Time now) const {
  if (by_deadline_.empty() || by_deadline_.begin()->first > now) return std::nullopt;
  return by_deadline_.begin()->second;
}

}  // namespace conduit::work_queue
