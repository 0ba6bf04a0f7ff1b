#include "common/grpc/server_runner.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/parse_failure_interceptor.h"
#include "grpc/health/v1/health.pb.h"

namespace conduit::grpc_util {

void RunningServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);  // all
  server_->Shutdown(absl::ToChronoTime(absl::Now() + drain_));
  server_->Wait();
}

absl::StatusOr<std::unique_ptr<RunningServer>> StartServer(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  auto colon = options.listen.rfind(':');
  int requested_port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &requested_port) || requested_port < 0 ||
      requested_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options.listen, "' is not host:port"));
  }
  grpc::EnableDefaultHealthCheckService(true);
  // Referencing the health descriptor links it in, so reflection can describe the service.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      options.listen,
      options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials(),
      &port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(ParseFailureInterceptorFactory(options.health_services));
  if (options.add_interceptors) options.add_interceptors(&interceptors);
  builder.experimental().SetInterceptorCreators(std::move(interceptors));

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on '", options.listen, "'"));
  }
  if (auto* health = server->GetHealthCheckService()) {
    for (const std::string& name : options.health_services) health->SetServingStatus(name, true);
  }
  return std::make_unique<RunningServer>(std::move(server), options.listen.substr(0, colon), port,
                                         options.drain_timeout);
}

std::function<int()> InstallShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return [set] {
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
  };
}

}  // namespace conduit::grpc_util
