#pragma once

#include <memory>
#include <string>
#include <vector>

#include <libpq-fe.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace conduit::outbox {

using PgResult = std::unique_ptr<PGresult, decltype(&PQclear)>;

// One libpq session (PGconn), closed on destruction. Statements run synchronously. Not
// thread-safe. Also used by the tests to set up and inspect the outbox table.
class PgConnection {
 public:
  // Connects with a libpq conninfo string ("host=/run/pg port=5432 dbname=app" or a URI);
  // `application_name` is the fallback shown in pg_stat_activity. UNAVAILABLE when the server
  // cannot be reached or refuses the login.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Open(
      const std::string& conninfo, const std::string& application_name = "conduit");
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one statement with text parameters ($1, $2, ...); results in binary format when
  // `binary` (integers big-endian, text and bytea as their bytes), else text. UNAVAILABLE when
  // the session is lost; INTERNAL for an SQL error (its message and SQLSTATE).
  absl::StatusOr<PgResult> Exec(const std::string& sql, const std::vector<std::string>& params = {},
                                bool binary = false);

  // Runs a script of statements separated by semicolons (no parameters), e.g. outbox.sql.
  absl::Status ExecScript(const std::string& sql);

  // `name` quoted as an SQL identifier; "schema.table" is quoted part by part.
  std::string QuoteIdentifier(const std::string& name) const;

  PGconn* raw() { return conn_; }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }

 private:
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  PGconn* conn_;
};

}  // namespace conduit::outbox
