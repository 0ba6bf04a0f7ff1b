#pragma once

// The coordinator's options, its observer, and the inputs and outputs of its calls. Plain data.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

struct CoordinatorOptions {
  absl::Duration default_session_timeout = absl::Seconds(45);
  absl::Duration min_session_timeout = absl::Seconds(1);
  absl::Duration max_session_timeout = absl::Minutes(30);
  // Told to members; never more than a third of their session timeout.
  absl::Duration heartbeat_interval = absl::Seconds(3);
  // How long partition counts and high watermarks are trusted before the broker is asked again
  // (a commit past the cached high watermark always asks).
  absl::Duration topic_refresh = absl::Seconds(30);
  // Lag samples older than this are dropped; the drain rate spans what is left.
  absl::Duration lag_window = absl::Minutes(5);
};

// Told about changes, for metrics. Called without locks held except where noted.
class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  virtual void OnMembers(const std::string& group, int members) {}
  virtual void OnRebalance(const std::string& group) {}
  virtual void OnCommit(const std::string& group) {}
  virtual void OnCommitRejected(const std::string& group, const std::string& reason) {}
  virtual void OnHeartbeat() {}
  virtual void OnLag(const std::string& group, const TopicPartition& tp, int64_t records,
                     double seconds) {}
  // The topic no longer exists: its lag is not a figure any more.
  virtual void OnLagGone(const std::string& group, const std::string& topic) {}
  virtual void OnGroupDeleted(const std::string& group) {}
};

enum class GroupState { kEmpty, kStable, kReconciling };

// The status of a call that found its group deleted after looking it up.
inline absl::Status DeletedMeanwhile() {
  return absl::UnavailableError("the group was deleted meanwhile; retry");
}
// The status of a call whose deadline passed before it changed anything.
inline absl::Status DeadlinePassed() {
  return absl::DeadlineExceededError(
      "the call's deadline passed before it could be applied; nothing was changed");
}

struct HeartbeatInput {
  std::string group_id;
  std::string member_id;
  MemberEpoch member_epoch;
  std::string instance_id;
  std::vector<std::string> subscription;  // sorted, unique; empty after join: unchanged
  PartitionSet owned;
  std::optional<absl::Duration> session_timeout;
  std::string client_id;
  std::string client_host;
  // The caller's deadline: a heartbeat still waiting for the broker then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct HeartbeatOutput {
  std::string member_id;
  MemberEpoch member_epoch;
  absl::Duration heartbeat_interval;
  PartitionSet assignment;
  PartitionSet pending;
  PartitionSet resets;
  GroupEpoch group_epoch;
};

struct CommitInput {
  std::string group_id;
  std::string member_id;
  MemberEpoch member_epoch;
  struct Entry {
    TopicPartition tp;
    int64_t offset = 0;
    std::string metadata;
  };
  std::vector<Entry> entries;
  // The caller's deadline: a commit still waiting for the broker's marks then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct MemberView {
  MemberRecord record;
  PartitionSet pending;
  absl::Time last_heartbeat;
};

struct PartitionLagView {
  TopicPartition tp;
  std::string owner;
  std::optional<OffsetRecord> committed;
  int64_t log_start = 0;
  int64_t high_watermark = 0;
  int64_t lag_records = 0;
  double lag_seconds = 0;
  std::optional<absl::Time> first_unprocessed_append_time;
  double drain_rate = 0;
  std::optional<double> catch_up_seconds;
};

struct GroupDescription {
  std::string group_id;
  GroupState state = GroupState::kEmpty;
  GroupEpoch epoch;
  int64_t rebalances = 0;
  std::vector<MemberView> members;
  std::vector<PartitionLagView> partitions;
  int64_t max_lag_records = 0;
  double max_lag_seconds = 0;
  std::string broker_error;
};

struct GroupListing {
  std::string group_id;
  GroupState state = GroupState::kEmpty;
  GroupEpoch epoch;
  int members = 0;
};

struct ResetInput {
  enum class Kind { kEarliest, kLatest, kTimestamp, kOffset, kShift };
  std::string group_id;
  std::string topic;
  std::vector<int32_t> partitions;  // empty: all
  Kind kind = Kind::kEarliest;
  absl::Time timestamp;
  int64_t value = 0;  // the offset, or the shift
  bool execute = false;
  std::string actor;
  std::string peer;
  std::string reason;
  // The caller's deadline: an executed reset still waiting for the broker then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct ResetOutput {
  bool executed = false;
  std::vector<PartitionReset> partitions;
  GroupEpoch group_epoch;
  uint64_t audit_id = 0;
};

}  // namespace conduit::coordinator
