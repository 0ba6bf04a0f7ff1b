#pragma once

// On-disk encodings of the work queue (version byte first; see the service README).

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/bridge.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue::codec {

// Job v2: u8 2 | u8 state | len+payload | varint headers (len+k, len+v)* | len+tenant
//   | varint zigzag priority | len+idempotency key | BE64 enqueued µs | BE64 ready µs
//   | len+token | BE64 lease deadline µs | varint failures | varint expiries | varint redrives
//   | BE64 died µs | len+death reason | varint attempts (varint number | len+worker
//   | BE64 leased µs | BE64 ended µs | u8 outcome | len+reason | u8 class)*
//   v2 adds: u8 has source | [len+topic | varint partition | varint offset]
std::string EncodeJob(const Job& job);
absl::StatusOr<Job> DecodeJob(uint64_t id, std::string_view in);

// Job index entry v1: u8 1 | u8 state | len+tenant | varint zigzag priority | BE64 ready µs
//   | BE64 died µs
std::string EncodeIndexEntry(const JobIndexEntry& entry);
absl::StatusOr<JobIndexEntry> DecodeIndexEntry(uint64_t id, std::string_view in);

// Lease v1: u8 1 | len+token | BE64 deadline µs | varint attempt number | len+worker
//   | BE64 leased µs
std::string EncodeLease(const LeaseRecord& lease);
absl::StatusOr<LeaseRecord> DecodeLease(uint64_t id, std::string_view in);

// Queue v2: u8 2 | BE64 id | len+name | BE64 created µs | varint visibility µs
//   | varint max attempts | varint max expiries | varint backoff initial µs | BE64 multiplier
//   (IEEE-754 bits) | varint backoff max µs | varint idempotency window µs | varint max depth
//   | varint max redrives
//   v2 adds: varint max ready age µs | varint weights (len+tenant | varint weight)*
//   | varint max in flight per tenant
std::string EncodeQueue(const QueueMeta& queue);
absl::StatusOr<QueueMeta> DecodeQueue(std::string_view in);

// Idempotency entry: BE64 job id | BE64 at µs. Fixed width, no version byte (like the counters).
std::string EncodeIdempotency(uint64_t job_id, absl::Time at);
absl::StatusOr<std::pair<uint64_t, absl::Time>> DecodeIdempotency(std::string_view in);

// Bridge v1: u8 1 | BE64 id | len+name | len+topic | len+group | len+queue | len+key prefix
//   | len+header | len+header value | len+tenant header | len+priority header | BE64 created µs
//   | u8 paused
std::string EncodeBridge(const BridgeSpec& spec);
absl::StatusOr<BridgeSpec> DecodeBridge(std::string_view in);

// A counter (next job id): BE64.
std::string EncodeCounter(uint64_t value);
absl::StatusOr<uint64_t> DecodeCounter(std::string_view in);

}  // namespace conduit::work_queue::codec
