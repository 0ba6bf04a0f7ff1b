#include "common/etcd/endpoint.h"

#include "absl/strings/str_cat.h"

namespace conduit::etcd::internal {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

absl::Status Unreachable(absl::string_view endpoint, absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat("etcd unreachable: ", endpoint, ": ", reason));
}

bool WaitConnected(grpc::Channel& channel, absl::Time deadline) {
  // Waiting in WaitForStateChange also polls the channel's sockets, so a reconnection makes
  // progress meanwhile (otherwise only gRPC's backup poller would drive it, every 5 s). The
  // channel may report TRANSIENT_FAILURE until it is READY again ("sticky" failure): it still
  // reconnects in the background, within ClientOptions::max_reconnect_backoff.
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN) return false;
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(deadline))) return false;
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return true;
}

}  // namespace conduit::etcd::internal
