#include "tools/outbox_relay/pg_outbox_store.h"

#include <endian.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"

namespace conduit::outbox {
namespace {

// The columns ReadUnpublished selects, in binary format: int8 as big-endian, text and bytea as
// their bytes. Headers: the object's string fields as "<len>:<name><len>:<value>" pairs
// (octet lengths), sorted by name, so no JSON parser is needed here.
constexpr char kReadColumns[] = R"sql(
SELECT o.sequence::int8, o.event_id::text, o.event_type::text, o.aggregate_id::text,
       o.aggregate_version::int8, (extract(epoch FROM o.occurred_at) * 1000000)::int8,
       o.payload::bytea,
       (SELECT string_agg(octet_length(h.key) || ':' || h.key ||
                          octet_length(h.value #>> '{}') || ':' || (h.value #>> '{}'),
                          '' ORDER BY h.key)
          FROM jsonb_each(CASE WHEN jsonb_typeof(o.headers) = 'object'
                               THEN o.headers ELSE '{}'::jsonb END) AS h
         WHERE jsonb_typeof(h.value) = 'string')
  FROM )sql";

int64_t Int8At(const PGresult* r, int row, int col) {
  uint64_t v = 0;
  std::memcpy(&v, PQgetvalue(r, row, col), sizeof v);
  return static_cast<int64_t>(be64toh(v));
}

std::string TextAt(const PGresult* r, int row, int col) {
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

// Parses the "<len>:<bytes>" pairs of kReadColumns' headers column.
absl::Status ParseHeaders(absl::string_view in,
                          std::vector<std::pair<std::string, std::string>>* out) {
  std::string parts[2];
  while (!in.empty()) {
    for (std::string& part : parts) {
      const size_t colon = in.find(':');
      size_t len = 0;
      if (colon == absl::string_view::npos || !absl::SimpleAtoi(in.substr(0, colon), &len) ||
          len > in.size() - colon - 1) {
        return absl::InternalError("outbox headers column is malformed");
      }
      part = std::string(in.substr(colon + 1, len));
      in.remove_prefix(colon + 1 + len);
    }
    out->emplace_back(std::move(parts[0]), std::move(parts[1]));
  }
  return absl::OkStatus();
}

}  // namespace

PgOutboxStore::PgOutboxStore(PgOutboxStoreOptions options)
    : options_(std::move(options)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

PgOutboxStore::~PgOutboxStore() {
  Reset();
  if (wake_fd_ >= 0) close(wake_fd_);
}

std::string PgOutboxStore::Channel(const std::string& table) {
  const size_t dot = table.rfind('.');
  return dot == std::string::npos ? table : table.substr(dot + 1);
}

absl::StatusOr<bool> PgOutboxStore::TryLock() {
  if (conn_ == nullptr) {
    CONDUIT_ASSIGN_OR_RETURN(conn_,
                             PgConnection::Open(options_.conninfo, options_.application_name));
    const std::string table = conn_->QuoteIdentifier(options_.table);
    read_sql_ = absl::StrCat(kReadColumns, table,
                             " AS o WHERE o.published_at IS NULL ORDER BY o.sequence LIMIT $1");
    mark_sql_ = absl::StrCat("UPDATE ", table,
                             " SET published_at = now() WHERE sequence = ANY($1::int8[])"
                             " AND published_at IS NULL");
  }
  CONDUIT_ASSIGN_OR_RETURN(
      PgResult r,
      conn_->Exec(
          "SELECT pg_try_advisory_lock(CASE WHEN $1::int8 = 0 "
          "THEN hashtextextended('conduit-outbox-relay:' || $2::text, 0) ELSE $1::int8 END)",
          {absl::StrCat(options_.lock_key), options_.table}));
  const bool held = PQgetvalue(r.get(), 0, 0)[0] == 't';
  if (held) {
    // LISTEN after taking the lock: rows inserted before it are found by the first read.
    CONDUIT_RETURN_IF_ERROR(
        conn_->Exec(absl::StrCat("LISTEN ", conn_->QuoteIdentifier(Channel(options_.table))))
            .status());
  }
  return held;
}

absl::StatusOr<std::vector<OutboxRow>> PgOutboxStore::ReadUnpublished(int limit) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("outbox session is not open");
  CONDUIT_ASSIGN_OR_RETURN(PgResult r, conn_->Exec(read_sql_, {absl::StrCat(limit)}, true));
  const PGresult* res = r.get();
  if (PQnfields(res) != 8) return absl::InternalError("outbox read returned unexpected columns");
  std::vector<OutboxRow> rows(PQntuples(res));
  for (int i = 0; i < PQntuples(res); ++i) {
    for (int col : {0, 1, 4, 5}) {
      if (PQgetisnull(res, i, col)) {
        return absl::InternalError(absl::StrCat(
            "outbox row has a NULL sequence, event_id, version or time (column ", col, ")"));
      }
    }
    OutboxRow& row = rows[i];
    row.sequence = Int8At(res, i, 0);
    row.event_id = TextAt(res, i, 1);
    row.event_type = TextAt(res, i, 2);
    row.aggregate_id = TextAt(res, i, 3);
    row.aggregate_version = Int8At(res, i, 4);
    row.occurred_at = absl::FromUnixMicros(Int8At(res, i, 5));
    if (!PQgetisnull(res, i, 6)) row.payload = TextAt(res, i, 6);
    CONDUIT_RETURN_IF_ERROR(ParseHeaders(TextAt(res, i, 7), &row.headers));
  }
  return rows;
}

absl::Status PgOutboxStore::MarkPublished(const std::vector<int64_t>& sequences) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("outbox session is not open");
  return conn_->Exec(mark_sql_, {absl::StrCat("{", absl::StrJoin(sequences, ","), "}")}).status();
}

bool PgOutboxStore::TakeNotifications() {
  bool any = false;
  while (PGnotify* n = PQnotifies(conn_->raw())) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

absl::StatusOr<bool> PgOutboxStore::WaitForInsert(absl::Duration timeout) {
  if (conn_ == nullptr) return absl::FailedPreconditionError("outbox session is not open");
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (PQconsumeInput(conn_->raw()) == 0) {
      return absl::UnavailableError(
          absl::StrCat("postgres: session lost: ", PQerrorMessage(conn_->raw())));
    }
    if (TakeNotifications()) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fds[2] = {{PQsocket(conn_->raw()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int rc = poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (rc < 0 && errno != EINTR) return absl::InternalError("poll failed");
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof count);
      return true;
    }
  }
}

void PgOutboxStore::Reset() { conn_.reset(); }

void PgOutboxStore::Interrupt() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

}  // namespace conduit::outbox
