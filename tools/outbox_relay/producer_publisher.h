#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/producer.h"
#include "tools/outbox_relay/outbox_store.h"

namespace conduit::outbox {

// The record a row becomes: key = aggregate_id, value = payload, event id = event_id, event
// time = occurred_at, headers = event-type and aggregate-version, then the row's string headers.
client::ProducerRecord ToRecord(const OutboxRow& row);

// Makes sure `topic` exists with a dedup window, on the broker at `broker`: the relay's
// exactly-once rests on it. An absent topic is created with `partitions` partitions and
// `dedup_window` when `partitions` > 0. FAILED_PRECONDITION for a topic without a dedup window;
// NOT_FOUND for an absent topic when `partitions` is 0; UNAVAILABLE when the broker does not
// answer. On success, the topic's dedup window.
absl::StatusOr<absl::Duration> EnsureTopic(const std::string& broker, const std::string& topic,
                                           int partitions, absl::Duration dedup_window);

// EventPublisher over the idempotent client::Producer. The producer is created on the first
// Publish (so a standby holds no producer session) and dropped after any failure: the next
// Publish starts a new one (a new epoch; what the old one may have appended is recognised by
// the dedup window). Not thread-safe.
class ProducerPublisher final : public EventPublisher {
 public:
  explicit ProducerPublisher(client::ProducerOptions options) : options_(std::move(options)) {}

  std::vector<absl::Status> Publish(const std::vector<OutboxRow>& rows) override;

 private:
  const client::ProducerOptions options_;
  std::unique_ptr<client::Producer> producer_;
};

}  // namespace conduit::outbox
