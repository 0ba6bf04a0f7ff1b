#pragma once

// Shared plumbing of the `conduit` CLI: global options, stubs, output (table or JSON) and the
// mapping of errors to messages and exit codes.

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc/dial.h"

namespace conduit::cli {

// Exit codes: 0 ok, 1 the server said no (the gRPC status is printed), 2 bad usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

struct Globals {
  // host:port, or a comma-separated list of them (bootstrap brokers of a cluster).
  std::string addr = "127.0.0.1:7070";
  // Where the group coordinator and the work queue answer when they are not at --addr (a
  // cluster's own conduit-coordinator and conduit-queue); empty: --addr, as conduit-standalone
  // serves everything at one address.
  std::string coordinator, queue;
  double timeout_seconds = 10;
  std::string output = "table";  // table | json
  // Security: the CA that signs the server's certificate (TLS when set), a client
  // certificate and key (mTLS), and a bearer token (a static token or a JWT) sent on every call.
  std::string tls_ca, tls_cert, tls_key, token;

  bool json() const { return output == "json"; }
  // These options with --addr set to the coordinator's (group commands) or the queue's (queue,
  // dlq and bridge commands) address.
  Globals Coordinator() const;
  Globals Queue() const;
  // The --addr list, split at commas (blanks dropped).
  std::vector<std::string> Bootstrap() const;
  // A channel to the first --addr address that accepts a connection (admin calls, which any
  // broker serves); with one address, to it without probing. When none connects, the last one
  // (its calls fail UNAVAILABLE).
  std::shared_ptr<grpc::Channel> Channel() const;
  // --tls-* files read, and --token: what the client library dials with.
  grpc_util::DialSecurity DialSecurity() const;
  // Channels use TLS when --tls-ca is set, else plaintext.
  std::shared_ptr<grpc::ChannelCredentials> Credentials() const;
  // A context with the --timeout deadline and the --token.
  std::unique_ptr<grpc::ClientContext> Context() const;
};

// What a parsed subcommand runs.
using Action = std::function<int()>;

// Each command family registers its subcommands; the chosen one stores its action in `run`.
void AddTopicCommands(CLI::App& app, const Globals& g, Action* run);
void AddRecordCommands(CLI::App& app, const Globals& g, Action* run);
void AddGroupCommands(CLI::App& app, const Globals& g, Action* run);
void AddQueueCommands(CLI::App& app, const Globals& g, Action* run);
void AddDlqCommands(CLI::App& app, const Globals& g, Action* run);
void AddClusterCommands(CLI::App& app, const Globals& g, Action* run);
void AddBridgeCommands(CLI::App& app, const Globals& g, Action* run);
void AddSecurityCommands(CLI::App& app, const Globals& g, Action* run);  // acl, audit

// Prints "error: CODE: message" on stderr and returns kExitError.
int Fail(const grpc::Status& status);
int Fail(const absl::Status& status);  // a client-library result, the same way
int UsageError(const std::string& message);
// The message as JSON (as grpcurl prints it) on stdout.
void PrintJson(const google::protobuf::Message& message);

// Calls `method` on a fresh stub with the --timeout deadline; on success prints the response as
// JSON (--output json) or through `table`. Call<Req, Resp>(g, &Service::Stub::Method, req, ...).
template <typename Req, typename Resp, typename Stub>
int Call(const Globals& g, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
         const Req& req, const std::function<void(const Resp&)>& table) {
  Stub stub(g.Channel());
  Resp resp;
  if (auto s = (stub.*method)(g.Context().get(), req, &resp); !s.ok()) return Fail(s);
  if (g.json()) {
    PrintJson(resp);
  } else {
    table(resp);
  }
  return kExitOk;
}

// Registers `name` under `parent`; once parsed, `make` builds the action stored in `run`.
CLI::App* Command(CLI::App* parent, const char* name, const char* help, Action* run,
                  std::function<Action()> make);

// A text table: columns sized to their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "30s", "5m", "1h30m", "7d" (absl durations plus days).
bool ParseDuration(const std::string& text, absl::Duration* out);
// RFC 3339 ("2026-11-29T10:00:00Z"), Unix seconds, or a time ago ("-1h", "-30m", "-7d").
bool ParseTime(const std::string& text, absl::Time* out);
// What ParseTime takes, for usage errors.
inline constexpr char kTimeFormats[] =
    "RFC 3339 (2026-11-29T10:00:00Z), Unix seconds, or a time ago (-1h, -30m, -7d)";
std::string TimeText(absl::Time t);
std::string DurationText(absl::Duration d);  // "5.1s", "3m12s"
std::string RateText(double per_second);     // "0.07", "3.50", "1250"

}  // namespace conduit::cli
