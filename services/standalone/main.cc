// conduit-standalone: every Conduit service in one process, on one port, one data directory.
// The group coordinator joins here when it lands.
#include "common/grpc/server_main.h"
#include "services/log_broker/log_broker_node.h"
#include "services/work_queue/queue_node.h"

int main(int argc, char** argv) {
  return conduit::grpc_util::ServerMain("conduit-standalone", argc, argv,
                                        {conduit::log_broker::LogBrokerNode::Component(),
                                         conduit::work_queue::QueueNode::Component()});
}
