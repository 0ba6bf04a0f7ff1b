#include "tools/conduit/cli.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc/status.h"

namespace conduit::cli {

namespace {

// True once `channel` is connected; false when it fails to connect (refused, unresolvable) or
// `deadline` passes first.
bool Connects(grpc::Channel& channel, absl::Time deadline) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(deadline))) return false;
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return true;
}

// The file's bytes ("" when unreadable: the handshake then fails with gRPC's message).
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::vector<std::string> Globals::Bootstrap() const {
  std::vector<std::string> out;
  for (absl::string_view a : absl::StrSplit(addr, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(a));
  }
  return out;
}

Globals Globals::Coordinator() const {
  Globals out = *this;
  if (!coordinator.empty()) out.addr = coordinator;
  return out;
}

Globals Globals::Queue() const {
  Globals out = *this;
  if (!queue.empty()) out.addr = queue;
  return out;
}

std::shared_ptr<grpc::Channel> Globals::Channel() const {
  const std::vector<std::string> addresses = Bootstrap();
  if (addresses.size() <= 1) {
    return grpc::CreateChannel(addresses.empty() ? addr : addresses[0], Credentials());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_seconds);
  std::shared_ptr<grpc::Channel> channel;
  for (const std::string& a : addresses) {
    channel = grpc::CreateChannel(a, Credentials());
    if (Connects(*channel, deadline)) break;
  }
  return channel;
}

grpc_util::DialSecurity Globals::DialSecurity() const {
  grpc_util::DialSecurity security;
  if (!tls_ca.empty()) security.ca_pem = ReadFile(tls_ca);
  if (!tls_cert.empty()) {
    security.cert_pem = ReadFile(tls_cert);
    security.key_pem = ReadFile(tls_key);
  }
  security.token = token;
  return security;
}

std::shared_ptr<grpc::ChannelCredentials> Globals::Credentials() const {
  if (tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(tls_ca);
  if (!tls_cert.empty()) {
    ssl.pem_cert_chain = ReadFile(tls_cert);
    ssl.pem_private_key = ReadFile(tls_key);
  }
  return grpc::SslCredentials(ssl);
}

std::unique_ptr<grpc::ClientContext> Globals::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(timeout_seconds)));
  return ctx;
}

int Fail(const grpc::Status& status) {
  std::fprintf(stderr, "error: %s: %s\n",
               absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())).c_str(),
               status.error_message().c_str());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    std::fprintf(stderr,
                 "(no answer: is a Conduit server running at the --addr address? In a cluster, "
                 "a broker or partition leader that went down is replaced within its lease TTL: "
                 "retry)\n");
  } else if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // A broker of a cluster serves no groups or queues: they have servers of their own.
    std::fprintf(stderr,
                 "(that server does not serve this call: a cluster's group coordinator and work "
                 "queue have their own addresses, given by --coordinator and --queue-addr or "
                 "CONDUIT_COORDINATOR and CONDUIT_QUEUE_ADDR; `make cluster` writes them to "
                 ".cluster/env)\n");
  }
  return kExitError;
}

int Fail(const absl::Status& status) { return Fail(grpc_util::ToGrpcStatus(status)); }

CLI::App* Command(CLI::App* parent, const char* name, const char* help, Action* run,
                  std::function<Action()> make) {
  CLI::App* cmd = parent->add_subcommand(name, help);
  cmd->callback([run, make = std::move(make)] { *run = make(); });
  return cmd;
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return kExitUsage;
}

void PrintJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;  // offset 0 and false are facts, not absences
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  std::fputs(out.c_str(), stdout);
  if (out.empty() || out.back() != '\n') std::fputc('\n', stdout);
}

void Table::Print() const {
  std::vector<size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::puts(line.c_str());
  }
}

bool ParseDuration(const std::string& text, absl::Duration* out) {
  absl::string_view t = text;
  if (absl::ConsumeSuffix(&t, "d")) {
    double days;
    if (!absl::SimpleAtod(t, &days)) return false;
    *out = absl::Hours(24 * days);
    return true;
  }
  return absl::ParseDuration(text, out);
}

bool ParseTime(const std::string& text, absl::Time* out) {
  absl::Duration ago;
  if (!text.empty() && text[0] == '-' && ParseDuration(text.substr(1), &ago)) {
    *out = absl::Now() - ago;
    return true;
  }
  int64_t seconds;
  if (absl::SimpleAtoi(text, &seconds)) {
    *out = absl::FromUnixSeconds(seconds);
    return true;
  }
  std::string err;
  return absl::ParseTime(absl::RFC3339_full, text, out, &err);
}

std::string TimeText(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::string DurationText(absl::Duration d) {
  // Tenths of a second under a minute, whole seconds above: "5.1s", "3m12s", not "5.085156s".
  const absl::Duration unit =
      absl::AbsDuration(d) < absl::Minutes(1) ? absl::Milliseconds(100) : absl::Seconds(1);
  return absl::FormatDuration(absl::Trunc(d, unit));
}

std::string RateText(double per_second) {
  return per_second < 10 ? absl::StrFormat("%.2f", per_second)
                         : absl::StrFormat("%.0f", per_second);
}

}  // namespace conduit::cli
