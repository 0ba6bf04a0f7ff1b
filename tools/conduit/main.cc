// conduit: one tool for topics, records, consumer groups, queues, dead letters and the cluster.
//
//   conduit [--addr host:port[,host:port...]] [--coordinator host:port] [--queue-addr host:port]
//           [--timeout s] [--output table|json]
//           [--tls-ca ca.pem [--tls-cert c.pem --tls-key c.key]] [--token T] <command> ...
//
// Exit codes: 0 ok; 1 the server refused (the gRPC status and message are printed); 2 bad usage.
#include <cstdlib>

#include "common/grpc/dial.h"
#include "tools/conduit/cli.h"

int main(int argc, char** argv) {
  using namespace conduit::cli;
  CLI::App app{"conduit: topics, records, consumer groups, work queues, dead letters, the cluster",
               "conduit"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the command (inherited by subcommands)
  Globals globals;
  if (const char* env = std::getenv("CONDUIT_ADDR")) globals.addr = env;
  app.add_option("--addr", globals.addr,
                 "server address host:port, or a comma-separated list of a cluster's brokers: "
                 "admin calls use the first reachable, produce and consume route by metadata "
                 "(env CONDUIT_ADDR)")
      ->capture_default_str();
  if (const char* env = std::getenv("CONDUIT_COORDINATOR")) globals.coordinator = env;
  if (const char* env = std::getenv("CONDUIT_QUEUE_ADDR")) globals.queue = env;
  app.add_option("--coordinator", globals.coordinator,
                 "the group coordinator's host:port when it is not at --addr (a cluster's "
                 "conduit-coordinator): group commands and consume --group (env "
                 "CONDUIT_COORDINATOR)");
  app.add_option("--queue-addr", globals.queue,
                 "the work queue's host:port when it is not at --addr (a cluster's "
                 "conduit-queue): queue, dlq and bridge commands (env CONDUIT_QUEUE_ADDR)");
  app.add_option("--timeout", globals.timeout_seconds, "per-call deadline in seconds")
      ->capture_default_str();
  if (const char* env = std::getenv("CONDUIT_TOKEN")) globals.token = env;
  if (const char* env = std::getenv("CONDUIT_TLS_CA")) globals.tls_ca = env;
  if (const char* env = std::getenv("CONDUIT_TLS_CERT")) globals.tls_cert = env;
  if (const char* env = std::getenv("CONDUIT_TLS_KEY")) globals.tls_key = env;
  app.add_option(
      "--tls-ca", globals.tls_ca,
      "PEM CA of the server's certificate: TLS instead of plaintext (env CONDUIT_TLS_CA)");
  app.add_option("--tls-cert", globals.tls_cert,
                 "PEM client certificate for mTLS, with --tls-key (env CONDUIT_TLS_CERT)");
  app.add_option("--tls-key", globals.tls_key, "PEM key of --tls-cert (env CONDUIT_TLS_KEY)");
  app.add_option(
      "--token", globals.token,
      "bearer token (static or JWT) sent as 'authorization: Bearer' (env CONDUIT_TOKEN)");
  app.add_option("--output,-o", globals.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  Action run;
  AddTopicCommands(app, globals, &run);
  AddRecordCommands(app, globals, &run);
  AddGroupCommands(app, globals, &run);
  AddQueueCommands(app, globals, &run);
  AddDlqCommands(app, globals, &run);
  AddClusterCommands(app, globals, &run);
  AddBridgeCommands(app, globals, &run);
  AddSecurityCommands(app, globals, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (!run) return UsageError("no command given (see --help)");
  // Commands that go through the client library (produce, consume) dial with the same TLS and
  // token as the admin calls.
  conduit::grpc_util::SetDefaultDialSecurity(globals.DialSecurity());
  return run();
}
