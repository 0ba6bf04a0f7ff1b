#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace conduit::grpc_util {

struct ServerOptions {
  // host:port; port 0 picks a free port (see RunningServer::port()).
  std::string listen = "127.0.0.1:0";
  // The listening port's credentials (MakeServerCredentials in server_tls.h); null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  int max_message_bytes = 64 << 20;
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // How long Shutdown waits for in-flight calls before cancelling them.
  absl::Duration drain_timeout = absl::Seconds(5);
  // Fully qualified service names reported SERVING by grpc.health.v1.Health (besides "").
  // They are also the services whose unparsable requests are answered INVALID_ARGUMENT
  // (parse_failure_interceptor.h); a method of any other service stays UNIMPLEMENTED.
  std::vector<std::string> health_services;
  // Adds interceptors after the parse-failure one (ServerMain: the audit step,
  // audit_interceptor.h). Null: none.
  std::function<void(
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>*)>
      add_interceptors;
};

// A started gRPC server with health checking and server reflection (grpcurl) enabled.
// Thread-safe; Shutdown may be called once from any thread.
class RunningServer {
 public:
  RunningServer(std::unique_ptr<grpc::Server> server, std::string host, int port,
                absl::Duration drain)
      : server_(std::move(server)), host_(std::move(host)), port_(port), drain_(drain) {}
  ~RunningServer() { Shutdown(); }

  int port() const { return port_; }
  // "host:port" with the chosen port, e.g. "127.0.0.1:43817".
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  grpc::Server* server() { return server_.get(); }

  // Stops accepting calls, lets in-flight calls finish for up to the drain timeout, then
  // cancels the rest. Marks the health service NOT_SERVING first.
  void Shutdown();

 private:
  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_;
  absl::Duration drain_;
  bool shut_down_ = false;
};

// Builds and starts a server hosting `services` (not owned; they must outlive the server).
// INVALID_ARGUMENT for an unparsable listen address, UNAVAILABLE if the port cannot be bound.
absl::StatusOr<std::unique_ptr<RunningServer>> StartServer(
    const ServerOptions& options, const std::vector<grpc::Service*>& services);

// Blocks SIGTERM and SIGINT in the calling thread (call first in main, before any thread
// starts, so that every thread inherits the mask), and returns a function that waits for one of
// them and returns its number.
std::function<int()> InstallShutdownSignals();

}  // namespace conduit::grpc_util
