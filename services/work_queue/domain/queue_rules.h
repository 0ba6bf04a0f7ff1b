#pragma once

#include <cstdint>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// Largest payload a job may carry (Enqueue, and a redrive's replacement payload).
inline constexpr size_t kMaxPayloadBytes = 1 << 20;

// Queue names: 1..249 of [a-zA-Z0-9._-], like topic names. INVALID_ARGUMENT otherwise.
absl::Status ValidateQueueName(absl::string_view name);

// INVALID_ARGUMENT naming the first field out of range.
absl::Status ValidateConfig(const QueueConfig& config);

// The delay before retry number `failures` (1 = after the first failure): exponential from
// backoff_initial by backoff_multiplier, capped at backoff_max, with full jitter — uniform in
// [0, cap] (AWS's "full jitter"), so retries of many jobs that failed together spread out.
absl::Duration Backoff(const QueueConfig& config, int32_t failures, absl::BitGenRef rng);

// The upper bound Backoff draws from (no jitter), for tests and docs.
absl::Duration BackoffCap(const QueueConfig& config, int32_t failures);

}  // namespace conduit::work_queue
