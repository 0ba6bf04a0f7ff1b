#include "common/grpc/server_main.h"

#include <cstdio>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/flags/flags.h"
#include "common/grpc/audit_interceptor.h"
#include "common/grpc/call_guard_flags.h"
#include "common/grpc/quota_metrics.h"
#include "common/grpc/rpc_metrics.h"
#include "common/grpc/server_runner.h"
#include "common/grpc/server_tls.h"
#include "common/logging/logging.h"
#include "common/metrics/metrics.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/tls_exposer.h"

ABSL_FLAG(std::string, data_dir, "./data", "Directory for the service's RocksDB data");
ABSL_FLAG(std::string, listen, "127.0.0.1:7070", "gRPC listen address host:port (port 0: any)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics listen address host:port (port 0: any; empty: off)");
ABSL_FLAG(std::string, metrics_tls_cert, "",
          "PEM certificate chain of the metrics port; with --metrics-tls-key it serves HTTPS "
          "(default: HTTP). Looked at on every scrape: replace it by a rename");
ABSL_FLAG(std::string, metrics_tls_key, "", "PEM private key of --metrics-tls-cert (unencrypted)");
ABSL_FLAG(std::string, metrics_tls_client_ca, "",
          "PEM CA bundle scrapers' client certificates must chain to (then required)");
ABSL_FLAG(std::string, port_file, "", "If set, write the chosen gRPC port here once serving");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the gRPC port; with --tls-key it serves TLS (default: "
          "plaintext). Re-read every --tls-refresh-seconds: replace it by a rename");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle client certificates are verified against (mTLS); re-read like --tls-cert");
ABSL_FLAG(std::string, tls_client_auth, "",
          "none, request (verify one if sent) or require; default: require with --tls-client-ca, "
          "else none");
ABSL_FLAG(int32_t, tls_refresh_seconds, 60,
          "How often the TLS files are read again; new handshakes use what changed");

namespace conduit::grpc_util {
namespace {

// Written whole (a rename), so a test polling for it never reads half a number.
void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  std::ofstream tmp(path + ".tmp");
  tmp << port << "\n";
  tmp.close();
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The --tls-* flags, checked: the listening port's credentials (plaintext without them).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsFromFlags(
    ServerTlsOptions* tls) {
  tls->cert_path = absl::GetFlag(FLAGS_tls_cert);
  tls->key_path = absl::GetFlag(FLAGS_tls_key);
  tls->client_ca_path = absl::GetFlag(FLAGS_tls_client_ca);
  tls->refresh_seconds = absl::GetFlag(FLAGS_tls_refresh_seconds);
  if (const std::string auth = absl::GetFlag(FLAGS_tls_client_auth); !auth.empty()) {
    auto parsed = ParseClientAuth(auth);
    if (!parsed.ok()) return parsed.status();
    tls->client_auth = *parsed;
  }
  return MakeServerCredentials(*tls);
}

}  // namespace

int ServerMain(const std::string& name, int argc, char** argv,
               std::vector<ServerComponent> components) {
  auto wait_for_signal = InstallShutdownSignals();
  const std::string usage = absl::StrCat(
      "a Conduit server (docs/OPERATIONS.md, \"Binaries and their flags\").\n\nUsage: ", name,
      " [--data-dir DIR] [--listen HOST:PORT] [--metrics-listen HOST:PORT] [flags...]\n"
      "Flags take --dash-names or --underscore_names; --helpfull adds Abseil's own.");
  flags::Parse(argc, argv, usage.c_str());
  // Debian's Abseil is built with deadlock detection on: a cost on every lock (gRPC's too).
  // Tests keep it on, where it has caught a lock-order inversion.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  logging::Init(absl::GetFlag(FLAGS_log_level));
  ServerTlsOptions tls;
  auto credentials = CredentialsFromFlags(&tls);
  if (!credentials.ok()) {
    spdlog::critical("{}: cannot start: {}", name, std::string(credentials.status().message()));
    return 1;
  }

  runtime::Runtime runtime;  // outlives every component (teardown runs before it goes)
  // The audit step: the guard notes, the interceptor records, the security component keeps.
  auto audit = std::make_shared<security::AuditRelay>();
  auto guard = CallGuardFromFlags(runtime.clock(), audit);
  if (guard.ok()) {
    if (absl::Status dial = SetDialSecurityFromFlags(); !dial.ok()) guard = dial;
  }
  if (!guard.ok()) {
    spdlog::critical("{}: cannot start: {}", name, std::string(guard.status().message()));
    return 1;
  }

  // Token and ACL files are read again when they change, for as long as the server runs.
  runtime::Scope reloads(&runtime, runtime::Pool::kStorage);
  ReloadCallGuardFiles(**guard, &reloads);

  metrics::MetricsHub metrics;
  // Quota use and throttling per principal, observed from before the first call.
  if (const auto& quotas = (*guard)->security().quotas; quotas != nullptr) {
    quotas->SetObserver(std::make_shared<QuotaMetrics>(metrics.registry()));
  }
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  const metrics::MetricsTlsFiles metrics_tls{
      .cert_path = absl::GetFlag(FLAGS_metrics_tls_cert),
      .key_path = absl::GetFlag(FLAGS_metrics_tls_key),
      .client_ca_path = absl::GetFlag(FLAGS_metrics_tls_client_ca)};
  if (metrics_listen.empty() && metrics_tls.enabled()) {
    spdlog::critical("{}: --metrics-tls-* is set but --metrics-listen is empty (metrics off)",
                     name);
    return 1;
  }
  if (!metrics_listen.empty()) {
    if (auto s = metrics.Serve(metrics_listen, metrics_tls); !s.ok()) {
      spdlog::critical("{}: {}", name, s.ToString());
      return 1;
    }
  }
  std::vector<grpc::Service*> services;
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  metrics.AddCollectable(std::make_shared<metrics::StorageCollector>(data_dir));
  ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.credentials = *credentials;
  options.add_interceptors = [audit, clock = runtime.clock(), registry = metrics.registry(),
                              streams = (*guard)->MayNoteNonAdminCalls()](auto* interceptors) {
    // After the parse-failure step (StartServer adds it first): a call's send hooks run in the
    // order the interceptors were added, so the metrics count the status that step corrected.
    interceptors->push_back(RpcMetricsInterceptorFactory(*registry, clock));
    interceptors->push_back(AuditInterceptorFactory(audit, clock, streams));
  };
  size_t built = 0;
  auto teardown = [&] {
    while (built > 0) components[--built].teardown();
  };
  for (; built < components.size(); ++built) {
    ServerComponent& c = components[built];
    if (auto s = c.build(data_dir, *metrics.registry(), &runtime, **guard, &services); !s.ok()) {
      spdlog::critical("{}: cannot start: {}", name, s.ToString());
      teardown();
      return 1;
    }
    options.health_services.insert(options.health_services.end(), c.health_services.begin(),
                                   c.health_services.end());
  }
  auto server = StartServer(options, services);
  if (!server.ok()) {
    spdlog::critical("{}: {}", name, server.status().ToString());
    teardown();
    return 1;
  }
  for (auto& c : components) c.started((*server)->address());
  WritePortFile(absl::GetFlag(FLAGS_port_file), (*server)->port());
  spdlog::info("{} callers: {}", name, DescribeCallGuardFlags());
  spdlog::info("{} serving gRPC ({}) on {} (data in {}){}", name, DescribeServerTls(tls),
               (*server)->address(), data_dir,
               metrics.port() ? fmt::format(", metrics on {}://{}:{}/metrics", metrics.scheme(),
                                            metrics_listen.substr(0, metrics_listen.rfind(':')),
                                            metrics.port())
                              : "");
  std::printf("%s listening on %s\n", name.c_str(), (*server)->address().c_str());
  if (tls.enabled()) {
    std::printf("try: grpcurl -cacert <CA of --tls-cert>%s %s list\n",
                tls.EffectiveClientAuth() == ClientAuth::kNone
                    ? ""
                    : " -cert <client.pem> -key <client.key>",
                (*server)->address().c_str());
  } else {
    std::printf("try: grpcurl -plaintext %s list\n", (*server)->address().c_str());
  }
  std::fflush(stdout);

  int sig = wait_for_signal();
  spdlog::info("{}: signal {}, draining", name, sig);
  for (auto& c : components) c.begin_shutdown();
  (*server)->Shutdown();
  server->reset();
  teardown();
  spdlog::info("{}: stopped", name);
  return 0;
}

}  // namespace conduit::grpc_util
