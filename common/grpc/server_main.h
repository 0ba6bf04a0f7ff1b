#pragma once

#include <functional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"

namespace conduit::grpc_util {

// What a server binary plugs into ServerMain: builds its services (kept alive by the binary)
// on the data directory, and is told when shutdown begins.
struct ServerParts {
  std::function<absl::Status(const std::string& data_dir, prometheus::Registry& registry,
                             std::vector<grpc::Service*>* services)>
      build;
  std::function<void()> begin_shutdown = [] {};
  std::function<void()> teardown = [] {};  // after the server has drained
};

// The main() of every Conduit server: parses the common flags (--data-dir, --listen,
// --metrics-listen, --port-file, --log-level), serves metrics and gRPC, prints the address,
// waits for SIGTERM/SIGINT, drains, tears down. Returns the process exit code.
int ServerMain(const std::string& name, int argc, char** argv, ServerParts parts);

}  // namespace conduit::grpc_util
