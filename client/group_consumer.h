#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cluster_router.h"
#include "client/dead_letters.h"
#include "client/rate_limiter.h"
#include "common/grpc/dial.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::client {

using TopicPartition = std::pair<std::string, int32_t>;
using PartitionSet = std::set<TopicPartition>;

struct ConsumerOptions {
  // Bootstrap brokers, host:port: `address` (when set) first, then `bootstrap`, as in
  // ProducerOptions. Each partition is read from its leader.
  std::string address;
  std::vector<std::string> bootstrap;
  // The group coordinator; default: the bootstrap broker that answered (conduit-standalone, or
  // broker and coordinator at one address).
  std::string coordinator_address;
  std::string group;
  std::vector<std::string> topics;
  std::string client_id;
  std::string instance_id;  // static membership
  absl::Duration session_timeout = absl::Seconds(10);
  int max_poll_records = 500;
  // At most this many records a second over time, so that replaying a backlog does not starve
  // other work: a token bucket holding up to a second's worth (at least 1). Poll returns no more
  // than the bucket holds, and waits (up to its timeout) while it is empty. 0 (or infinite):
  // unlimited; negative: INVALID_ARGUMENT from Create.
  double max_records_per_second = 0;
  // ProcessAndCommit only: each record is tried up to retry.max_attempts times (with backoff)
  // and, once they are used up or the handler says PermanentError, goes to dead_letter's queue
  // with its evidence; the consumer then moves past it (client/dead_letters.h). Without a
  // dead_letter target, a failing record stops ProcessAndCommit as before.
  RetryPolicy retry;
  std::optional<DeadLetterTarget> dead_letter;
  // Where a partition without a committed offset starts.
  enum class Start { kEarliest, kLatest } start = Start::kEarliest;
  absl::Duration request_timeout = absl::Seconds(10);
  // How to reach the servers: TLS, a client certificate, a bearer token
  // (grpc_util::DialSecurity); unset: the process default (grpc_util::SetDefaultDialSecurity).
  std::optional<grpc_util::DialSecurity> security;
};

struct ConsumedRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;
  absl::Time append_time;
  std::optional<absl::Time> event_time;
  std::string event_id;  // empty when the producer set none
};

// A member of a consumer group. A background thread heartbeats at the interval the coordinator
// asks for and applies assignment changes: revoked partitions are handed to `on_revoked` (where
// the application may commit what it has processed) and released on the next heartbeat; new
// partitions start from their committed offsets and are handed to `on_assigned`. Offset resets
// (ResetOffsets on the group) move the positions. Poll and Commit are called from the application's
// thread. Thread-safe.
//
// Routing (ClusterRouter): Fetch and ListOffsets go to each partition's leader. A not-leader
// answer is followed at once to the leader it names (when its epoch is newer); an unreachable
// leader or an offline partition is retried after a metadata refresh and a backoff, a few
// times, before Poll returns the error. Heartbeats and commits go to the one coordinator.
class GroupConsumer {
 public:
  using PartitionsCallback = std::function<void(const PartitionSet&)>;

  // Reads the cluster's metadata from the first bootstrap broker that answers and joins the
  // group; the first assignment is in place when this returns. INVALID_ARGUMENT without a group
  // or topics; UNAVAILABLE when no bootstrap broker answers; the coordinator's error otherwise.
  static absl::StatusOr<std::unique_ptr<GroupConsumer>> Create(ConsumerOptions options,
                                                               PartitionsCallback on_assigned = {},
                                                               PartitionsCallback on_revoked = {});
  ~GroupConsumer();  // Close()

  // Records from owned partitions, at most max_poll_records (and what max_records_per_second
  // allows), waiting up to `timeout` for some. Positions move past what is returned.
  absl::StatusOr<std::vector<ConsumedRecord>> Poll(absl::Duration timeout);
  // Commits the positions of the owned partitions (after what Poll returned).
  absl::Status Commit();
  // Commits these next-offsets (for example up to the last record actually processed).
  absl::Status Commit(const std::map<TopicPartition, int64_t>& offsets);
  // The same without waiting; `done` runs on a gRPC thread. Close waits for outstanding ones.
  void CommitAsync(std::function<void(absl::Status)> done);
  // Poll, hand each record to `handle`, and commit once all of them succeeded: at-least-once.
  // With a dead_letter target, a record whose tries are used up is dead-lettered and counts as
  // processed. Returns the number of records processed, or the first error.
  absl::StatusOr<int> ProcessAndCommit(
      absl::Duration timeout, const std::function<absl::Status(const ConsumedRecord&)>& handle);

  PartitionSet assignment();
  std::string member_id();
  // Leaves the group (its partitions move at once) and stops heartbeating.
  void Close();
  // Stops heartbeating without leaving, as a crashed process would: the coordinator moves the
  // partitions when the session times out. For tests and demonstrations.
  void Abandon();

 private:
  GroupConsumer(ConsumerOptions options, PartitionsCallback on_assigned,
                PartitionsCallback on_revoked);
  absl::Status HeartbeatOnce();
  // The next heartbeat's request (a join when not a member); `*owned` gets what it reports.
  conduit::coordinator::v1::HeartbeatRequest HeartbeatRequestFor(PartitionSet* owned);
  // Takes in an answered heartbeat: revocations, new and reset partitions, the new epoch.
  absl::Status ApplyHeartbeat(const PartitionSet& owned,
                              const conduit::coordinator::v1::HeartbeatResponse& resp);
  void HeartbeatLoop();
  // Committed offsets (or the start position) of `partitions`.
  absl::StatusOr<std::map<TopicPartition, int64_t>> StartPositions(const PartitionSet& partitions);
  conduit::coordinator::v1::CommitOffsetsRequest CommitRequest(
      const std::map<TopicPartition, int64_t>& positions, const std::string& member_id,
      int32_t epoch) const;
  absl::Status CommitPositions(const std::map<TopicPartition, int64_t>& positions,
                               const std::string& member_id, int32_t epoch);
  absl::StatusOr<int64_t> ListOffset(const TopicPartition& tp, conduit::log::v1::OffsetSpec spec);
  // One Fetch of up to `max_records` of `tp` from `position` on its leader, long-polling up to
  // `wait` (if positive).
  grpc::Status FetchFromLeader(const TopicPartition& tp, int64_t position, absl::Duration wait,
                               int max_records, conduit::log::v1::FetchResponse* resp);
  // How many records the next fetch may return (max_poll_records, or fewer by the rate limit);
  // 0 with `*wait` set to when a token comes.
  int FetchBudget(absl::Duration* wait);
  // Moves the records of `resp` to `out` and the position to `next`, unless `tp` was revoked or
  // reset (its position is no longer `position`) meanwhile.
  void TakeFetched(const TopicPartition& tp, int64_t position, int64_t next,
                   conduit::log::v1::FetchResponse& resp, std::vector<ConsumedRecord>* out);
  void SetDeadline(grpc::ClientContext* ctx) const;
  void StopThread();

  const ConsumerOptions options_;
  const PartitionsCallback on_assigned_, on_revoked_;
  std::unique_ptr<ClusterRouter> router_;
  std::unique_ptr<conduit::coordinator::v1::GroupCoordinator::Stub> coordinator_;

  absl::Mutex mu_;
  std::string member_id_ ABSL_GUARDED_BY(mu_);
  int32_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  std::map<TopicPartition, int64_t> positions_ ABSL_GUARDED_BY(mu_);  // owned → next offset
  size_t next_partition_ ABSL_GUARDED_BY(mu_) = 0;                    // Poll's round robin
  std::optional<RateLimiter> limiter_ ABSL_GUARDED_BY(mu_);           // max_records_per_second
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int async_commits_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<DeadLetterHandler> dead_letters_;  // with options_.dead_letter; Process* only
  absl::Mutex heartbeat_mu_;  // one heartbeat at a time (the loop, or Create's first)
  std::thread heartbeat_;
};

}  // namespace conduit::client
