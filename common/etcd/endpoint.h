#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

// Internal to common/etcd: one etcd endpoint's channel and stubs, and the error mapping every
// call shares.

namespace conduit::etcd::internal {

// The metadata with which etcd refuses (UNAVAILABLE "etcdserver: no leader") a stream on a member
// without a leader, and ends such streams when the member loses it.
inline constexpr absl::string_view kRequireLeaderKey = "hasleader";
inline constexpr absl::string_view kRequireLeaderValue = "true";

struct Endpoint {
  std::string address;  // host:port, as messages name it
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

// The gRPC status as an absl::Status, code and message verbatim (the codes line up).
absl::Status FromGrpc(const grpc::Status& status);

// UNAVAILABLE or DEADLINE_EXCEEDED: etcd could not be reached or did not answer in time.
bool IsUnreachable(const absl::Status& status);

// UNAVAILABLE "etcd unreachable: <endpoint>: <reason>", the one form of that error.
absl::Status Unreachable(absl::string_view endpoint, absl::string_view reason);

// Whether the channel is connected, waiting until `deadline` for it to (re)connect. When false,
// nothing was sent on it: a change may safely go to another endpoint.
bool WaitConnected(grpc::Channel& channel, absl::Time deadline);

}  // namespace conduit::etcd::internal
