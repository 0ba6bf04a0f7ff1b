#pragma once

#include "common/grpc/call_guard.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "services/work_queue/bridge/bridge_manager.h"

namespace conduit::work_queue::api {

namespace bpb = ::conduit::queue::v1;

// gRPC adapter of conduit.queue.v1.Bridges (callback API): converts, calls the BridgeManager,
// converts back. Changes and DescribeBridge block briefly (a synced write, a runner stop, the
// coordinator's lag), so they run on gRPC's callback threads as short blocking calls.
// Thread-safe; `bridges` must outlive it.
class BridgeService final : public bpb::Bridges::CallbackService {
 public:
  explicit BridgeService(bridge::BridgeManager* bridges,
                         const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open())
      : bridges_(bridges), guard_(guard) {}

  grpc::ServerUnaryReactor* CreateBridge(grpc::CallbackServerContext*,
                                         const bpb::CreateBridgeRequest*,
                                         bpb::CreateBridgeResponse*) override;
  grpc::ServerUnaryReactor* ListBridges(grpc::CallbackServerContext*,
                                        const bpb::ListBridgesRequest*,
                                        bpb::ListBridgesResponse*) override;
  grpc::ServerUnaryReactor* DescribeBridge(grpc::CallbackServerContext*,
                                           const bpb::DescribeBridgeRequest*,
                                           bpb::DescribeBridgeResponse*) override;
  grpc::ServerUnaryReactor* PauseBridge(grpc::CallbackServerContext*,
                                        const bpb::PauseBridgeRequest*,
                                        bpb::PauseBridgeResponse*) override;
  grpc::ServerUnaryReactor* ResumeBridge(grpc::CallbackServerContext*,
                                         const bpb::ResumeBridgeRequest*,
                                         bpb::ResumeBridgeResponse*) override;
  grpc::ServerUnaryReactor* DeleteBridge(grpc::CallbackServerContext*,
                                         const bpb::DeleteBridgeRequest*,
                                         bpb::DeleteBridgeResponse*) override;

 private:
  // Bridges are cluster configuration: Describe on the cluster to see them, Alter to change them
  // (creating one also needs Read on its topic and Write on its queue).
  bridge::BridgeManager* const bridges_;
  const grpc_util::CallGuard& guard_;
};

}  // namespace conduit::work_queue::api
