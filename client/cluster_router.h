#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc/dial.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::client {

// The trailing metadata of a not-leader answer (log.proto, "Routing in a cluster").
inline constexpr char kLeaderIdKey[] = "conduit-leader-id";
inline constexpr char kLeaderAddressKey[] = "conduit-leader-address";
inline constexpr char kLeaderEpochKey[] = "conduit-leader-epoch";

// Where a not-leader answer says a partition's leader is.
struct LeaderHint {
  int32_t id = -1;
  std::string address;
  int32_t epoch = -1;
};

// The hint in a failed call's trailing metadata: set only for FAILED_PRECONDITION carrying all
// three conduit-leader-* entries (other FAILED_PRECONDITIONs, such as a fenced producer epoch,
// carry none).
std::optional<LeaderHint> NotLeaderHint(const grpc::ClientContext& ctx, const grpc::Status& status);

// The address to dial for `advertised`, as read from the broker reached at `via`: a broker that
// advertises a wildcard or empty host (listening on 0.0.0.0:7070) is taken to be on via's host,
// and an empty address to be `via` itself.
std::string ResolveAdvertised(const std::string& advertised, const std::string& via);

struct RouterOptions {
  // Brokers to ask for metadata, in order; the first that answers GetMetadata is used.
  std::vector<std::string> bootstrap;
  // Deadline of each call the router makes or makes for CallLeader.
  absl::Duration request_timeout = absl::Seconds(10);
  // CallLeader: calls per request, and the first wait before retrying an offline partition or
  // an unreachable leader (doubled each time).
  int max_attempts = 5;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  // How to reach the servers: TLS, a client certificate, a bearer token
  // (grpc_util::DialSecurity); unset: the process default (grpc_util::SetDefaultDialSecurity).
  std::optional<grpc_util::DialSecurity> security;
};

// Routes a client's log calls by the cluster's metadata: which broker leads each partition
// (GetMetadata), one channel and stub per broker address, and the moves a broker reports when
// it refuses a call for a partition it does not lead. Produce, Fetch, Tail and ListOffsets go to
// the leader (Leader, CallLeader); other calls to any broker (AnyBroker).
//
// What it knows of a partition changes only forward: an update replaces the leader only at an
// equal or newer leader epoch (a not-leader hint: only a newer one), so metadata read from a
// lagging broker never moves a partition back. A topic whose id changed (deleted and created
// again) is taken as new. Broker addresses learned from hints are kept across refreshes.
//
// Stubs live as long as the router (callers may keep the pointers). Thread-safe; Refresh and
// CallLeader block on the network and must not run under a caller's lock.
class ClusterRouter {
 public:
  using Stub = conduit::log::v1::LogService::Stub;

  // A partition's leader as the router knows it.
  struct Route {
    Stub* stub = nullptr;
    int32_t leader = -1;
    int32_t epoch = -1;
  };

  // Reads the metadata from the first bootstrap broker that answers. INVALID_ARGUMENT without
  // bootstrap addresses; otherwise the last broker's error (UNAVAILABLE when none is reachable),
  // its message naming every address tried.
  static absl::StatusOr<std::unique_ptr<ClusterRouter>> Create(RouterOptions options);

  // The broker that answered the latest metadata, for calls any broker serves (DescribeTopic,
  // InitProducer, admin calls), and its address.
  Stub* AnyBroker();
  std::string answered_address();

  // The partition count of `topic`; an unknown topic is looked up again first. NOT_FOUND when
  // it does not exist, UNAVAILABLE while its partitions are not placed yet.
  absl::StatusOr<int32_t> PartitionCount(const std::string& topic);

  // The partition's leader now. NOT_FOUND for an unknown topic or partition; UNAVAILABLE while
  // the partition is offline (leader -1) or its leader's address is unknown (Refresh, retry).
  absl::StatusOr<Route> Leader(const std::string& topic, int32_t partition);

  // Reads the metadata again: from the broker that answered last, the other known brokers, then
  // the bootstrap list, the first that answers. Its error when none does (nothing changes).
  absl::Status Refresh();

  // After a call for the partition, sent along `sent`, failed with `status`: takes in the
  // leader a not-leader answer names when its epoch is newer than the router's. True when the
  // partition's route has moved past `sent` (by this hint or another): resend at once. False
  // when there is no hint or it is not news: Refresh and back off before retrying.
  bool OnNotLeader(const std::string& topic, int32_t partition, const Route& sent,
                   const grpc::ClientContext& ctx, const grpc::Status& status);

  // A blocking call to the partition's leader: `call` runs with the leader's stub and a fresh
  // context with the request_timeout deadline. A not-leader answer is followed at once;
  // UNAVAILABLE (leader down, partition offline) and DEADLINE_EXCEEDED are retried after a
  // Refresh and a backoff; at most max_attempts calls. Any other status is returned as is, and
  // so is the last one when the attempts run out.
  using LeaderCall = std::function<grpc::Status(Stub& stub, grpc::ClientContext& ctx)>;
  grpc::Status CallLeader(const std::string& topic, int32_t partition, const LeaderCall& call);

 private:
  struct PartitionRoute {
    int32_t leader = -1;
    int32_t epoch = -1;
  };
  struct TopicRoute {
    uint64_t topic_id = 0;
    std::vector<PartitionRoute> partitions;
  };

  explicit ClusterRouter(RouterOptions options) : options_(std::move(options)) {}
  // GetMetadata (every topic) from `address`.
  grpc::Status ReadMetadata(const std::string& address,
                            conduit::log::v1::GetMetadataResponse* response);
  // Takes in metadata read from `via` (forward only, see the class comment).
  void ApplyLocked(const conduit::log::v1::GetMetadataResponse& response, const std::string& via)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stub for `address`, made on first use.
  Stub* StubLocked(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Addresses Refresh tries, in order, without repeats.
  std::vector<std::string> CandidatesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RouterOptions options_;
  absl::Mutex refresh_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Refresh at a time
  absl::Mutex mu_;
  std::map<int32_t, std::string> brokers_ ABSL_GUARDED_BY(mu_);  // broker id → address
  std::map<std::string, TopicRoute> topics_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Stub>> stubs_ ABSL_GUARDED_BY(mu_);  // never erased
  std::string answered_ ABSL_GUARDED_BY(mu_);  // the address the latest metadata came from
};

// The bootstrap list of a client's options: `address` (when set) first, then `bootstrap`. Each
// may be a comma-separated list ("b1:7070,b2:7070", as the CLI's --addr and the servers'
// --bridge-bootstrap take); blanks are dropped.
std::vector<std::string> BootstrapList(const std::string& address,
                                       const std::vector<std::string>& bootstrap);

}  // namespace conduit::client
