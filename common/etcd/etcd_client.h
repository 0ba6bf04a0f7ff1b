#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/etcd/txn.h"
#include "common/etcd/types.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace conduit::etcd {

// How a Client (below) times and checks its calls.
struct ClientOptions {
  // Bound on one call, all endpoint attempts included. Each attempt gets an equal share
  // (request_timeout / number of endpoints), so a stopped etcd does not use up the whole call.
  absl::Duration request_timeout = absl::Seconds(5);
  // Cap on gRPC's reconnect backoff, so an etcd that comes back is used again within about this.
  absl::Duration max_reconnect_backoff = absl::Seconds(1);
  // HTTP/2 keepalive pings while a call is open, which is how a watch on a stopped (not closed)
  // etcd notices, after about keepalive_time + keepalive_timeout of silence. etcd refuses pings
  // more often than its --grpc-keepalive-min-time (5 s) by closing the connection.
  absl::Duration keepalive_time = absl::Seconds(10);
  absl::Duration keepalive_timeout = absl::Seconds(5);
  // Told of every call once it ends (etcd's method name: Range, Put, DeleteRange, Txn, Compact,
  // LeaseGrant, LeaseKeepAlive, LeaseRevoke, LeaseTimeToLive, Watch), for metrics. Runs on the
  // calling thread; must not block.
  std::function<void(absl::string_view method, absl::Duration latency, const absl::Status& status)>
      on_request;
  // TLS to etcd (grpc::SslCredentials with etcd's CA, and a client certificate when etcd runs
  // with --client-cert-auth); null: plaintext. With it, endpoints may be written https://.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// What a watch hands its owner. All three must be set. They run on gRPC's callback threads, one
// at a time and in order: keep them short (hand work off; never block on etcd or call
// WatchHandle::Cancel from inside them). Each watch ends with at most one of on_compacted and
// on_ended; neither runs after Cancel.
struct WatchHandlers {
  // A batch of changes, in revision order, and the store's revision when etcd sent it. No change
  // is skipped or repeated between batches of one watch.
  std::function<void(std::vector<WatchEvent> events, int64_t revision)> on_events;
  // The start revision was compacted away: etcd ended the watch without sending anything. Read
  // the state again (its RangeResult::revision) and watch from that revision + 1.
  std::function<void(int64_t compact_revision)> on_compacted;
  // The stream ended without Cancel: UNAVAILABLE "etcd unreachable: ..." when etcd went away,
  // stopped answering keepalives or lost its raft leader ("etcdserver: no leader"), ABORTED when
  // etcd cancelled the watch for another reason.
  // Changes after the last batch may have been missed: re-read and watch again.
  std::function<void(absl::Status status)> on_ended;
};

namespace internal {
class WatchReactor;
struct Endpoint;
}  // namespace internal

// A running watch. Destroying it (or Cancel) ends the stream and waits until gRPC is done with
// it: no handler runs once Cancel has returned. May outlive the Client. Not thread-safe itself
// (one owner); must not be cancelled or destroyed from one of its own handlers.
class WatchHandle {
 public:
  explicit WatchHandle(std::unique_ptr<internal::WatchReactor> reactor);
  ~WatchHandle();  // Cancel()
  WatchHandle(const WatchHandle&) = delete;
  WatchHandle& operator=(const WatchHandle&) = delete;

  // Ends the watch and waits for the stream to finish. Idempotent.
  void Cancel();

 private:
  std::unique_ptr<internal::WatchReactor> reactor_;
};

// A client of etcd's v3 API (KV, Txn, Lease, Watch) over one gRPC channel per endpoint. Calls
// are synchronous (the watch excepted), each bounded by ClientOptions::request_timeout.
//
// Endpoints: a call starts at the endpoint that answered last and waits up to its attempt's share
// of the request timeout for that endpoint's channel to connect. It moves on to the next one when
// the channel does not connect (nothing was sent) and, for reads and lease keep-alives (safe to
// repeat), also after UNAVAILABLE or DEADLINE_EXCEEDED; each endpoint is tried at most once per
// call. So with etcd down a call fails after the request timeout, not at once. A change (Put,
// Delete, Commit, Grant, Revoke, Compact) that failed after it was sent is not repeated: its
// outcome is unknown, and the caller re-reads (a guarded Txn repeated blindly would report that its
// own write lost).
//
// Errors: a failure to reach etcd is UNAVAILABLE "etcd unreachable: <endpoint>: <reason>" (the
// last endpoint tried). Other failures keep etcd's gRPC code with "etcd <method>: <message>", for
// example OUT_OF_RANGE for a compacted or future revision, INVALID_ARGUMENT for an empty key or
// a Txn that is too large; NOT_FOUND is this client's own for a lease that is gone.
//
// Thread-safe: any number of threads may call at once.
class Client {
 public:
  // Endpoints are "host:port" ("http://" is accepted and dropped). Contacts nobody: the channels
  // connect on first use, so this succeeds while etcd is down. INVALID_ARGUMENT for no
  // endpoints, an empty one or an https:// one (TLS is not supported yet).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(std::vector<std::string> endpoints,
                                                         ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // --- KV. Reads are linearizable (etcd's default).

  // The key, if it exists (kvs empty otherwise), and the store's revision.
  absl::StatusOr<RangeResult> Get(absl::string_view key);
  // Every key starting with `prefix` in key order (every key for ""), and the store's revision.
  absl::StatusOr<RangeResult> GetPrefix(absl::string_view prefix);
  // Sets the key, attached to `lease` if given (NOT_FOUND: no such lease). Returns the revision
  // of the write, which is then the key's mod_revision.
  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value,
                              LeaseId lease = LeaseId());
  // Removes the key (deleted 0 if it did not exist; the revision does not move then).
  absl::StatusOr<DeleteResult> Delete(absl::string_view key);
  // Removes every key starting with `prefix` ("" is refused INVALID_ARGUMENT: use a prefix).
  absl::StatusOr<DeleteResult> DeletePrefix(absl::string_view prefix);
  // Applies the Txn atomically (common/etcd/txn.h).
  absl::StatusOr<TxnResult> Commit(const Txn& txn);
  // Drops history before `revision`: reads and watches from older revisions then fail
  // (OUT_OF_RANGE here, WatchHandlers::on_compacted for a watch). OUT_OF_RANGE for a revision
  // already compacted or not yet reached.
  absl::Status Compact(int64_t revision);

  // --- Lease.

  // A lease of `ttl_seconds` (raised to etcd's minimum if below it; see Lease).
  absl::StatusOr<Lease> Grant(int64_t ttl_seconds);
  // Renews the lease to its granted TTL; returns that TTL in seconds. NOT_FOUND "lease <id> not
  // found" when the lease is gone (expired or revoked) — etcd's own answer is a TTL of 0, which
  // this client never returns. One short-lived stream per call: the caller schedules it (a third
  // of the TTL is the usual period).
  absl::StatusOr<int64_t> KeepAliveOnce(LeaseId id);
  // Ends the lease and deletes its keys at once. NOT_FOUND when it is already gone.
  absl::Status Revoke(LeaseId id);
  // The lease's remaining and granted TTL (and its keys if `with_keys`). NOT_FOUND when gone.
  absl::StatusOr<LeaseInfo> TimeToLive(LeaseId id, bool with_keys = false);

  // --- Watch.

  // Watches one key, or every key under a prefix, from `start_revision` (inclusive; 0: changes
  // after now). Returns once etcd has confirmed the watch, so every change after the return is
  // delivered; handlers may start running before it returns. Fails (no handler runs then)
  // UNAVAILABLE when no endpoint confirms within the request timeout, INVALID_ARGUMENT when a
  // handler is missing.
  absl::StatusOr<std::unique_ptr<WatchHandle>> WatchKey(absl::string_view key,
                                                        int64_t start_revision,
                                                        WatchHandlers handlers);
  absl::StatusOr<std::unique_ptr<WatchHandle>> WatchPrefix(absl::string_view prefix,
                                                           int64_t start_revision,
                                                           WatchHandlers handlers);

 private:
  Client(std::vector<std::unique_ptr<internal::Endpoint>> endpoints, ClientOptions options);

  // Runs `call` on endpoints as the class comment says. `what` names the etcd method for
  // messages; `repeatable` allows a retry after the request was sent.
  absl::Status Invoke(absl::string_view what, bool repeatable,
                      const std::function<absl::Status(internal::Endpoint&, absl::Time)>& call);
  absl::Status InvokeOnEndpoints(
      absl::string_view what, bool repeatable,
      const std::function<absl::Status(internal::Endpoint&, absl::Time)>& call);
  absl::StatusOr<RangeResult> Range(absl::string_view key, bool prefix);
  absl::StatusOr<DeleteResult> DeleteRange(absl::string_view key, bool prefix);
  absl::StatusOr<std::unique_ptr<WatchHandle>> Watch(absl::string_view key, bool prefix,
                                                     int64_t start_revision,
                                                     WatchHandlers handlers);
  absl::Duration AttemptTimeout() const;

  const std::vector<std::unique_ptr<internal::Endpoint>> endpoints_;
  const ClientOptions options_;
  std::atomic<size_t> preferred_{0};  // the endpoint that answered last
};

}  // namespace conduit::etcd
