// conduit-queue: the work queue alone.
#include "common/grpc/server_main.h"
#include "services/security/security_node.h"
#include "services/work_queue/queue_node.h"

int main(int argc, char** argv) {
  return conduit::grpc_util::ServerMain("conduit-queue", argc, argv,
                                        {conduit::work_queue::QueueNode::Component(),
                                         conduit::security_service::SecurityNode::Component()});
}
