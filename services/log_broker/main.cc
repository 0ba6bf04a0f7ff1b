// conduit-broker: the log broker alone.
#include "common/grpc/server_main.h"
#include "services/log_broker/log_broker_node.h"

int main(int argc, char** argv) {
  std::unique_ptr<conduit::log_broker::LogBrokerNode> node;
  conduit::grpc_util::ServerParts parts;
  parts.build = [&](const std::string& data_dir, prometheus::Registry& registry,
                    std::vector<grpc::Service*>* services) -> absl::Status {
    auto opened = conduit::log_broker::LogBrokerNode::Open(data_dir, registry,
                                                           conduit::time::SystemClock::Get());
    if (!opened.ok()) return opened.status();
    node = *std::move(opened);
    services->push_back(node->service());
    return absl::OkStatus();
  };
  parts.begin_shutdown = [&] { node->service()->BeginShutdown(); };
  parts.teardown = [&] { node.reset(); };
  return conduit::grpc_util::ServerMain("conduit-broker", argc, argv, std::move(parts));
}
