#pragma once

// What the work queue needs from a log to redrive dead letters to a topic: produce records and
// say when every one is acknowledged. Implemented over the client library in bridge/.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

struct RepublishedRecord {
  std::string topic;
  std::optional<std::string> key;
  std::string value;
  std::vector<Header> headers;
  std::string event_id;
};

class RecordPublisher {
 public:
  virtual ~RecordPublisher() = default;
  // Produces `records` (idempotently); `done` once all are acknowledged, or with the first
  // error (some may have been appended: a retry's repeats are absorbed by event id).
  virtual void Publish(std::vector<RepublishedRecord> records,
                       std::function<void(absl::Status)> done) = 0;
};

// The record a dead letter becomes when redriven to a topic: the letter's source topic unless
// `topic` is set; key from conduit-source-key, event id from conduit-event-id; the value is the
// payload (or `replacement`); headers without the conduit-* evidence the dead letter added.
RepublishedRecord RecordOfDeadLetter(const Job& letter, const std::string& topic,
                                     const std::optional<std::string>& replacement);

}  // namespace conduit::work_queue
