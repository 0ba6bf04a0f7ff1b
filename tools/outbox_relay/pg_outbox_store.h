#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tools/outbox_relay/outbox_store.h"
#include "tools/outbox_relay/pg_connection.h"

namespace conduit::outbox {

struct PgOutboxStoreOptions {
  std::string conninfo;                  // libpq conninfo or URI
  std::string table = "conduit_outbox";  // optionally schema-qualified
  // The advisory lock's key; 0: hashtextextended('conduit-outbox-relay:' || table, 0), so
  // every relay of one table contends for the same lock.
  int64_t lock_key = 0;
  std::string application_name = "conduit-outbox-relay";
};

// OutboxStore over one libpq session: pg_try_advisory_lock on the session, LISTEN on the
// channel named like the table (without its schema), which outbox.sql's trigger notifies.
// Not thread-safe, except Interrupt() (an eventfd the notification wait also watches).
class PgOutboxStore final : public OutboxStore {
 public:
  explicit PgOutboxStore(PgOutboxStoreOptions options);
  ~PgOutboxStore() override;

  absl::StatusOr<bool> TryLock() override;
  absl::StatusOr<std::vector<OutboxRow>> ReadUnpublished(int limit) override;
  absl::Status MarkPublished(const std::vector<int64_t>& sequences) override;
  absl::StatusOr<bool> WaitForInsert(absl::Duration timeout) override;
  void Reset() override;
  void Interrupt() override;

  // The channel LISTENed to: the table name without its schema.
  static std::string Channel(const std::string& table);

 private:
  // Drains pending notifications; true when there was any.
  bool TakeNotifications();

  const PgOutboxStoreOptions options_;
  std::unique_ptr<PgConnection> conn_;
  std::string read_sql_;  // built with the quoted table name once connected
  std::string mark_sql_;
  const int wake_fd_;  // eventfd: Interrupt() writes, WaitForInsert() watches
};

}  // namespace conduit::outbox
