// conduit-standalone: every Conduit service in one process, on one port, one data directory.
// The group coordinator and the work queue join here as they land.
#include "common/grpc/server_main.h"
#include "services/log_broker/log_broker_node.h"

int main(int argc, char** argv) {
  std::unique_ptr<conduit::log_broker::LogBrokerNode> broker;
  conduit::grpc_util::ServerParts parts;
  parts.build = [&](const std::string& data_dir, prometheus::Registry& registry,
                    std::vector<grpc::Service*>* services) -> absl::Status {
    auto opened = conduit::log_broker::LogBrokerNode::Open(data_dir, registry,
                                                           conduit::time::SystemClock::Get());
    if (!opened.ok()) return opened.status();
    broker = *std::move(opened);
    services->push_back(broker->service());
    return absl::OkStatus();
  };
  parts.begin_shutdown = [&] { broker->service()->BeginShutdown(); };
  parts.teardown = [&] { broker.reset(); };
  return conduit::grpc_util::ServerMain("conduit-standalone", argc, argv, std::move(parts));
}
