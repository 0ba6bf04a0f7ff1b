#pragma once

// The interfaces the relay loop (OutboxRelay) needs: the outbox table (OutboxStore, PostgreSQL
// in production: PgOutboxStore), the topic it publishes to (EventPublisher: ProducerPublisher)
// and what it reports (RelayObserver: RelayMetrics). No libpq, gRPC or Prometheus here, so the
// loop's rules are tested with fakes.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace conduit::outbox {

// One row of the outbox table (tools/outbox_relay/outbox.sql), as the relay publishes it.
struct OutboxRow {
  int64_t sequence = 0;  // the table's order; rows are published in it
  std::string event_id;  // unique; the record's event id, which the dedup window keys on
  std::string event_type;
  std::string aggregate_id;  // the record's key: one aggregate's events share a partition
  int64_t aggregate_version = 0;
  absl::Time occurred_at;              // the record's event time
  std::optional<std::string> payload;  // the record's value; NULL: a record without a value
  // The headers object's string fields, sorted by name (other JSON types are not carried).
  std::vector<std::pair<std::string, std::string>> headers;
};

// The outbox table through one database session. The advisory lock belongs to the session:
// when the session is lost, so is the lock, and the relay must take it again before it reads.
// Not thread-safe (one relay loop uses it), except Interrupt().
class OutboxStore {
 public:
  virtual ~OutboxStore() = default;

  // Opens the session if there is none, then tries the relay's advisory lock on it (without
  // waiting) and, once held, listens for the table's notifications. True when this session
  // holds the lock; false when another session does. UNAVAILABLE when the database cannot be
  // reached.
  virtual absl::StatusOr<bool> TryLock() = 0;

  // Up to `limit` unpublished rows (published_at IS NULL) with the lowest sequences, in
  // sequence order. UNAVAILABLE when the session is lost; INTERNAL for a table that does not
  // match the schema.
  virtual absl::StatusOr<std::vector<OutboxRow>> ReadUnpublished(int limit) = 0;

  // Sets published_at on the rows with these sequences (ascending), in one statement.
  // UNAVAILABLE when the session is lost (the rows may or may not be marked).
  virtual absl::Status MarkPublished(const std::vector<int64_t>& sequences) = 0;

  // Waits up to `timeout` for a notification that rows were inserted; true when one came (or
  // Interrupt was called), false on timeout. UNAVAILABLE when the session is lost.
  virtual absl::StatusOr<bool> WaitForInsert(absl::Duration timeout) = 0;

  // Closes the session (releasing the lock); the next TryLock opens a new one.
  virtual void Reset() = 0;

  // Wakes a WaitForInsert in progress, or the next one. Thread-safe; for shutdown.
  virtual void Interrupt() = 0;
};

// The topic the rows go to. Not thread-safe (one relay loop uses it).
class EventPublisher {
 public:
  virtual ~EventPublisher() = default;

  // Publishes `rows` in order and waits for every answer: one status per row, OK once the
  // broker acknowledged the record (a duplicate the dedup window dropped counts as
  // acknowledged). After a failure the publisher starts afresh (a new producer) on the next
  // call.
  virtual std::vector<absl::Status> Publish(const std::vector<OutboxRow>& rows) = 0;
};

// What the relay reports (metrics). Called from the relay loop's thread.
class RelayObserver {
 public:
  virtual ~RelayObserver() = default;
  // Whether this relay holds the advisory lock (active) or waits for it (standby).
  virtual void OnActive(bool active) {}
  // Rows acknowledged by the broker and marked in the table.
  virtual void OnPublished(int64_t rows) {}
  // A database or publish error (the loop backs off and retries).
  virtual void OnError(absl::string_view what) {}
  // Age of the oldest unpublished row (now - occurred_at of the lowest sequence unpublished);
  // zero when none is left.
  virtual void OnBacklogAge(absl::Duration age) {}
};

}  // namespace conduit::outbox
