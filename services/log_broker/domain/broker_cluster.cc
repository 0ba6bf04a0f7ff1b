// The Broker in cluster mode: following the applied view of the cluster's metadata (ApplyView),
// GetMetadata's answer and partition reassignment.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/domain/not_leader.h"
#include "services/log_broker/domain/validation.h"

namespace conduit::log_broker {

ClusterView Broker::Metadata(const std::string& self_address) const {
  // The view this broker serves by: what GetMetadata names is what Produce and Fetch here obey.
  const auto applied = topics_.AppliedView();
  if (applied == nullptr) return ClusterView{};  // nothing applied yet: nothing served yet
  ClusterView view = *applied;
  // A cluster of one does not know the address it serves on: the caller does.
  if (auto self = view.brokers.find(cluster_->self());
      self != view.brokers.end() && self->second.address.empty()) {
    self->second.address = self_address;
  }
  return view;
}

absl::Status Broker::ApplyView(std::shared_ptr<const ClusterView> view) {
  absl::MutexLock admin(&admin_mu_);
  if (auto applied = topics_.AppliedView(); applied && applied->revision > view->revision) {
    return absl::OkStatus();
  }
  for (const auto& [name, assignment] : view->topics) {
    CONDUIT_RETURN_IF_ERROR(MaterializeTopic(assignment));
  }
  for (const auto& topic : topics_.Snapshot()) {
    if (!view->topics.contains(topic->name)) CONDUIT_RETURN_IF_ERROR(RemoveTopic(topic));
  }
  const int32_t self = cluster_->self();
  for (const auto& [name, assignment] : view->topics) {
    CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, topics_.Find(name));
    for (size_t p = 0; p < assignment.partitions.size(); ++p) {
      const auto& a = assignment.partitions[p];
      if (!a) continue;
      if (a->leader == self) {
        // Appends from now on are stamped with the view's epoch. Epochs never go back: a lower
        // one is a stale view, refused and logged by the caller.
        const LeaderEpoch before = topic->partitions[p].RaiseLeaderEpoch(a->leader_epoch);
        if (a->leader_epoch < before) {
          return absl::FailedPreconditionError(
              absl::StrFormat("leader epoch %d of %s/%d is older than its current epoch %d",
                              a->leader_epoch, name, p, before));
        }
      }
      replicas_.AssignRole(
          *topic, static_cast<int32_t>(p), *a,
          p < assignment.partition_revisions.size() ? assignment.partition_revisions[p] : 0);
    }
  }
  topics_.Publish(std::move(view));
  return absl::OkStatus();
}

absl::Status Broker::MaterializeTopic(const TopicAssignment& assignment) {
  const TopicMeta& meta = assignment.meta;
  auto local = topics_.Find(meta.name);
  if (local.ok() && (*local)->id != meta.id) {  // a topic of that name deleted and made again
    CONDUIT_RETURN_IF_ERROR(RemoveTopic(*local));
    local = absl::NotFoundError("replaced");
  }
  if (!local.ok()) {
    CONDUIT_RETURN_IF_ERROR(store_->CreateTopic(meta));
    ids_->NoteInUse(meta.id);
    topics_.Insert(std::make_shared<TopicState>(meta));
  } else if ((*local)->config() != meta.config) {
    TopicMeta updated = (*local)->meta();
    updated.config = meta.config;
    CONDUIT_RETURN_IF_ERROR(store_->UpdateTopic(updated));
    (*local)->set_config(meta.config);
  }
  if (meta.config.durability == Durability::kInterval) {
    pipeline_.RequestSyncEvery(meta.config.flush_interval);
  }
  return absl::OkStatus();
}

absl::Status Broker::ReassignPartition(const std::string& topic, int32_t partition,
                                       const std::vector<int32_t>& replicas,
                                       int64_t throttle_bytes_per_second) {
  if (throttle_bytes_per_second < 0) {
    return absl::InvalidArgumentError("throttle_bytes_per_second must be >= 0");
  }
  for (int attempt = 0; attempt < 20; ++attempt) {
    const std::shared_ptr<const ClusterView> view = cluster_->View();
    const TopicAssignment* t = view->FindTopic(topic);
    if (t == nullptr) return absl::NotFoundError(absl::StrCat("topic '", topic, "' does not exist"));
    if (partition < 0 || partition >= static_cast<int32_t>(t->partitions.size())) {
      return absl::NotFoundError(absl::StrFormat("partition %d of topic '%s' does not exist",
                                                 partition, topic));
    }
    if (!t->partitions[partition]) {
      return absl::UnavailableError("the partition is not placed yet; retry shortly");
    }
    if (replicas.empty() || replicas.size() > view->brokers.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "replicas must name 1..%d live brokers, got %d", view->brokers.size(), replicas.size()));
    }
    for (size_t i = 0; i < replicas.size(); ++i) {
      if (!view->brokers.contains(replicas[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("broker ", replicas[i], " is not a live broker of the cluster"));
      }
      if (std::find(replicas.begin(), replicas.begin() + i, replicas[i]) !=
          replicas.begin() + i) {
        return absl::InvalidArgumentError(absl::StrCat("broker ", replicas[i], " is named twice"));
      }
    }
    PartitionAssignment next = *t->partitions[partition];
    if (next.replicas == replicas && next.leader == replicas.front()) return absl::OkStatus();
    next.target_replicas = replicas;
    next.throttle_bytes_per_second = throttle_bytes_per_second;
    CONDUIT_ASSIGN_OR_RETURN(
        int64_t written, cluster_->UpdatePartitionState(t->meta.id, partition,
                                                        t->partition_revisions[partition], next));
    if (written > 0) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));  // the state moved: read the next view
  }
  return absl::AbortedError("the partition's state kept changing; try again");
}

}  // namespace conduit::log_broker
