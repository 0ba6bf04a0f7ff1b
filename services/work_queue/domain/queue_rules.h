#pragma once

#include <cstdint>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// Largest payload a job may carry (Enqueue, and a redrive's replacement payload).
inline constexpr size_t kMaxPayloadBytes = 1 << 20;

// Longest tenant name, in a job and in a queue's tenant_weights; and how many weights a queue
// may list (each is kept in memory, in the queue's record and in every stats call).
inline constexpr size_t kMaxTenantBytes = 256;
inline constexpr size_t kMaxTenantWeights = 1000;
// AddDeadLetters: letters per call, attempts per letter, bytes of a reason.
inline constexpr size_t kMaxDeadLettersPerAdd = 1000;
inline constexpr size_t kMaxDeadLetterAttempts = 1000;
inline constexpr size_t kMaxReasonBytes = 64 * 1024;
// The longest a job may be delayed at enqueue (by delay; not_before is checked against the clock).
inline constexpr absl::Duration kMaxDelay = absl::Hours(24 * 365);
// The longest max_ready_age a queue may alarm at.
inline constexpr absl::Duration kMaxReadyAge = absl::Hours(24 * 365);
// QueueConfig::flush_interval (the broker's topics take the same range).
inline constexpr absl::Duration kMinFlushInterval = absl::Milliseconds(1);
inline constexpr absl::Duration kMaxFlushInterval = absl::Seconds(60);
// A paced redrive moves between this many jobs per second and kMaxRedriveRate (0: all at once).
inline constexpr double kMinRedriveRate = 0.001;
inline constexpr double kMaxRedriveRate = 1e6;

// Queue names: 1..249 of [a-zA-Z0-9._-], like topic names. INVALID_ARGUMENT otherwise.
absl::Status ValidateQueueName(absl::string_view name);

// INVALID_ARGUMENT naming the first field out of range.
absl::Status ValidateConfig(const QueueConfig& config);

// A redrive's or discard's choice of dead letters: ids or a filter, not both; a limit >= 0; a
// rate of 0 or within [kMinRedriveRate, kMaxRedriveRate] (NaN and infinities are refused).
// INVALID_ARGUMENT otherwise.
absl::Status ValidateSelection(const std::vector<uint64_t>& ids, bool has_filter, int32_t limit);
absl::Status ValidateRedriveRate(double rate);

// The delay before retry number `failures` (1 = after the first failure): exponential from
// backoff_initial by backoff_multiplier, capped at backoff_max, with full jitter — uniform in
// [0, cap] (AWS's "full jitter"), so retries of many jobs that failed together spread out.
absl::Duration Backoff(const QueueConfig& config, int32_t failures, absl::BitGenRef rng);

}  // namespace conduit::work_queue
