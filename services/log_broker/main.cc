// conduit-broker: the log broker alone.
#include "common/grpc/server_main.h"
#include "services/log_broker/log_broker_node.h"
#include "services/security/security_node.h"

int main(int argc, char** argv) {
  return conduit::grpc_util::ServerMain("conduit-broker", argc, argv,
                                        {conduit::log_broker::LogBrokerNode::Component(),
                                         conduit::security_service::SecurityNode::Component()});
}
