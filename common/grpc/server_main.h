#pragma once

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/grpc/call_guard.h"
#include "common/runtime/runtime.h"

namespace conduit::grpc_util {

// One service a server binary hosts: builds itself (and its gRPC services) on the data
// directory and the process's one Runtime (its threads), is told when shutdown begins, and is
// torn down after the server has drained.
struct ServerComponent {
  // `guard` (the --auth-*/--acl-* flags) is the authorise step its services take on every
  // call; it outlives them.
  std::function<absl::Status(const std::string& data_dir, prometheus::Registry& registry,
                             runtime::Runtime* runtime, const CallGuard& guard,
                             std::vector<grpc::Service*>* services)>
      build;
  // Told the address the server is serving on, before the port file is written.
  std::function<void(const std::string& address)> started = [](const std::string&) {};
  std::function<void()> begin_shutdown = [] {};
  std::function<void()> teardown = [] {};
  // Service names the health service reports SERVING.
  std::vector<std::string> health_services;
};

// The main() of every Conduit server: parses the common flags (--data-dir, --listen,
// --metrics-listen, --port-file, --log-level, the gRPC port's --tls-* flags and the
// components' own), serves metrics and gRPC (plaintext, or TLS per server_tls.h) for every
// component on one Runtime, prints the address, waits for SIGTERM/SIGINT, drains, tears down in
// reverse order. Returns the process exit code: 1 when it cannot start (among others, a bad
// --tls-* combination or an unreadable TLS file, before any data is opened).
int ServerMain(const std::string& name, int argc, char** argv,
               std::vector<ServerComponent> components);

}  // namespace conduit::grpc_util
