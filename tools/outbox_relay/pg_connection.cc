#include "tools/outbox_relay/pg_connection.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace conduit::outbox {

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Open(
    const std::string& conninfo, const std::string& application_name) {
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* values[] = {conninfo.c_str(), application_name.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("postgres: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message(absl::StripTrailingAsciiWhitespace(PQerrorMessage(conn)));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("postgres: cannot connect: ", message));
  }
  return std::unique_ptr<PgConnection>(new PgConnection(conn));
}

PgConnection::~PgConnection() { PQfinish(conn_); }

absl::Status PgConnection::ExecScript(const std::string& sql) {
  // PQexec runs several statements; the result of the last (or of the first failure) is
  // returned.
  PgResult result(PQexec(conn_, sql.c_str()), &PQclear);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return absl::OkStatus();
  std::string message(absl::StripTrailingAsciiWhitespace(result ? PQresultErrorMessage(result.get())
                                                                : PQerrorMessage(conn_)));
  return ok() ? absl::InternalError(absl::StrCat("postgres: ", message))
              : absl::UnavailableError(absl::StrCat("postgres: session lost: ", message));
}

absl::StatusOr<PgResult> PgConnection::Exec(const std::string& sql,
                                            const std::vector<std::string>& params, bool binary) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::string& p : params) values.push_back(p.c_str());
  PgResult result(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, binary ? 1 : 0),
                  &PQclear);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  std::string message(absl::StripTrailingAsciiWhitespace(result ? PQresultErrorMessage(result.get())
                                                                : PQerrorMessage(conn_)));
  if (PQstatus(conn_) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat("postgres: session lost: ", message));
  }
  const char* state = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
  // Class 08: connection exceptions; 57P01..03: the server is shutting down.
  const std::string sqlstate = state ? state : "";
  if (absl::StartsWith(sqlstate, "08") || absl::StartsWith(sqlstate, "57P")) {
    return absl::UnavailableError(absl::StrCat("postgres: ", message, " (", sqlstate, ")"));
  }
  return absl::InternalError(absl::StrCat("postgres: ", message, " (", sqlstate, ")"));
}

std::string PgConnection::QuoteIdentifier(const std::string& name) const {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    char* quoted = PQescapeIdentifier(conn_, part.data(), part.size());
    if (quoted == nullptr) return "\"\"";  // refused (bad encoding): matches no table
    parts.emplace_back(quoted);
    PQfreemem(quoted);
  }
  return absl::StrJoin(parts, ".");
}

}  // namespace conduit::outbox
