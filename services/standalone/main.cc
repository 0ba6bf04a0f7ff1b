// conduit-standalone: every Conduit service in one process, on one port, one data directory.
// The coordinator asks the broker over gRPC on this same port (--broker-address to override).
#include "common/grpc/server_main.h"
#include "services/coordinator/coordinator_node.h"
#include "services/log_broker/log_broker_node.h"
#include "services/security/security_node.h"
#include "services/work_queue/queue_node.h"

int main(int argc, char** argv) {
  return conduit::grpc_util::ServerMain("conduit-standalone", argc, argv,
                                        {conduit::log_broker::LogBrokerNode::Component(),
                                         conduit::coordinator::CoordinatorNode::Component(),
                                         conduit::work_queue::QueueNode::Component(),
                                         conduit::security_service::SecurityNode::Component()});
}
