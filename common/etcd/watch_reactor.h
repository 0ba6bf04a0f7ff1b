#pragma once

#include <optional>
#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/etcd/etcd_client.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace conduit::etcd::internal {

// One etcd watch on its own Watch stream, on gRPC's callback API (no thread of its own). Writes
// the create request once, then keeps one read outstanding and hands each batch of events to
// the handlers from gRPC's thread. The first terminal answer (compaction, a cancel by etcd, the
// stream's end) runs at most one terminal handler and ends the stream; Cancel suppresses them
// all. Owned by a WatchHandle, which destroys it only after Cancel (OnDone has run by then).
class WatchReactor final
    : public grpc::ClientBidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  WatchReactor(std::string endpoint, etcdserverpb::WatchRequest create, WatchHandlers handlers);

  // Starts the stream on `stub`. Call once; Cancel must follow at some point.
  void Start(etcdserverpb::Watch::Stub& stub);
  // Waits until etcd confirms the watch (OK) or refuses it, the stream ends (its status), or
  // `deadline` passes (DEADLINE_EXCEEDED). Before OK no handler has run or will run.
  absl::Status AwaitCreated(absl::Time deadline);
  // No handler runs after this returns: stops delivery, cancels the stream, waits for OnDone.
  // Idempotent. Aborts when called from one of this watch's handlers (it would wait forever).
  void Cancel();

  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // Whether a handler may run now; `terminal`: and no other may run after it.
  bool MayDeliver(bool terminal);
  // Records etcd's answer to the create request; false when etcd refused the watch.
  bool Confirm(const etcdserverpb::WatchResponse& response);
  // Handles a response announcing the end of the watch; false if the response is a plain batch.
  bool HandleEnd(const etcdserverpb::WatchResponse& response);

  const std::string endpoint_;
  const etcdserverpb::WatchRequest create_;  // written once at Start
  const WatchHandlers handlers_;
  etcdserverpb::WatchResponse response_;  // the outstanding read (only the read chain uses it)
  grpc::ClientContext context_;

  absl::Mutex mu_;
  bool created_ ABSL_GUARDED_BY(mu_) = false;    // etcd confirmed the watch
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // Cancel was called
  bool finished_ ABSL_GUARDED_BY(mu_) = false;   // a terminal handler ran (or none will)
  std::optional<absl::Status> refused_ ABSL_GUARDED_BY(mu_);      // etcd refused the create
  std::optional<absl::Status> done_status_ ABSL_GUARDED_BY(mu_);  // OnDone's, verbatim
  absl::Notification done_;  // OnDone has run: gRPC is done with this reactor
};

}  // namespace conduit::etcd::internal
