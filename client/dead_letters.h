#pragma once

// Dead letters for log consumers: a per-record retry policy, and a queue's dead-letter lane for
// the records whose retries ran out (or that failed permanently), with the evidence an operator
// needs — so that one bad record does not stop its partition. Used through ConsumerOptions
// (`retry`, `dead_letter`) by GroupConsumer::ProcessAndCommit.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/grpc/dial.h"
#include "conduit/queue/v1/queue.grpc.pb.h"

namespace conduit::client {

struct ConsumedRecord;

struct RetryPolicy {
  int max_attempts = 3;  // per record, the first included
  absl::Duration backoff_initial = absl::Milliseconds(100);
  double backoff_multiplier = 2;
  absl::Duration backoff_max = absl::Seconds(10);  // full jitter below the capped exponential
};

struct DeadLetterTarget {
  std::string queue_address;  // a work queue server, host:port
  std::string queue;          // whose dead-letter lane takes the records
  // Recorded as headers conduit-consumer-version and (copied from the record's header of this
  // name) conduit-schema-version.
  std::string consumer_version;
  std::string schema_version_header = "schema-version";
  absl::Duration request_timeout = absl::Seconds(10);
  // How to reach the servers: TLS, a client certificate, a bearer token
  // (grpc_util::DialSecurity); unset: the process default (grpc_util::SetDefaultDialSecurity).
  std::optional<grpc_util::DialSecurity> security;
};

// A handler's answer that retrying cannot help (a malformed record, a missing field): the record
// goes to the dead-letter lane at once. Any other error is transient and retried.
absl::Status PermanentError(absl::string_view message);
bool IsPermanent(const absl::Status& status);

// One failed try of a record.
struct FailedAttempt {
  absl::Time started;
  absl::Time ended;
  absl::Status error;
};

// The wait before the next try after `failed` tries: uniform in [0, min(max, initial ·
// multiplier^(failed-1))] (full jitter).
absl::Duration RetryBackoff(const RetryPolicy& policy, int failed, absl::BitGenRef rng);

// The dead letter a record becomes: payload = value; the record's headers plus
// conduit-source-topic, -partition, -offset, conduit-source-key (when keyed), conduit-event-id
// (when set), conduit-consumer-group, conduit-consumer-version, conduit-schema-version (when the
// record has it); source; every attempt with its times, error and class; the reason (the last
// error); idempotency key "dlq/<group>/<topic>/<partition>/<offset>" so a consumer that crashes
// after sending it and before committing does not dead-letter the record twice.
::conduit::queue::v1::NewDeadLetter DeadLetterFor(const ConsumedRecord& record,
                                                  const std::string& group,
                                                  const std::string& worker,
                                                  const DeadLetterTarget& target,
                                                  const std::vector<FailedAttempt>& attempts);

// Wraps a record handler: tries it per the policy and, once the tries are used up (or on a
// permanent error), adds the record to the target's dead-letter lane and answers OK, so the
// consumer moves past it. A dead letter that cannot be added is answered as an error (the
// record is not committed: nothing is skipped). Thread-compatible.
class DeadLetterHandler {
 public:
  using Handler = std::function<absl::Status(const ConsumedRecord&)>;
  DeadLetterHandler(RetryPolicy policy, DeadLetterTarget target, std::string group,
                    std::string worker);

  absl::Status Handle(const ConsumedRecord& record, const Handler& handle);
  int64_t dead_lettered() const { return dead_lettered_; }

 private:
  absl::Status Send(const ConsumedRecord& record, const std::vector<FailedAttempt>& attempts);

  const RetryPolicy policy_;
  const DeadLetterTarget target_;
  const std::string group_, worker_;
  std::unique_ptr<::conduit::queue::v1::WorkQueue::Stub> stub_;
  absl::BitGen rng_;
  int64_t dead_lettered_ = 0;
};

}  // namespace conduit::client
