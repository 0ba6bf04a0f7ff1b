// conduit-coordinator: the group coordinator alone. --broker-address names the log broker.
#include "common/grpc/server_main.h"
#include "services/coordinator/coordinator_node.h"
#include "services/security/security_node.h"

int main(int argc, char** argv) {
  return conduit::grpc_util::ServerMain("conduit-coordinator", argc, argv,
                                        {conduit::coordinator::CoordinatorNode::Component(),
                                         conduit::security_service::SecurityNode::Component()});
}
