// The Broker in cluster mode: following the applied view of the cluster's metadata, and the
// serving rule (only the leader at the current epoch serves a partition).

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

std::shared_ptr<const ClusterView> Broker::AppliedView() const {
  absl::MutexLock lock(&view_mu_);
  return view_;
}

ClusterView Broker::Metadata(const std::string& self_address) const {
  // The view this broker serves by: what GetMetadata names is what Produce and Fetch here obey.
  const auto applied = AppliedView();
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
  if (auto applied = AppliedView(); applied && applied->revision > view->revision) {
    return absl::OkStatus();
  }
  for (const auto& [name, assignment] : view->topics) {
    CONDUIT_RETURN_IF_ERROR(MaterializeTopic(assignment));
  }
  for (const auto& topic : TopicsSnapshot()) {
    if (!view->topics.contains(topic->name)) CONDUIT_RETURN_IF_ERROR(RemoveTopic(topic));
  }
  const int32_t self = cluster_->self();
  for (const auto& [name, assignment] : view->topics) {
    CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, FindTopic(name));
    for (size_t p = 0; p < assignment.partitions.size(); ++p) {
      const auto& a = assignment.partitions[p];
      if (!a) continue;
      if (a->leader == self) {
        // Epochs never go back: a lower one is a stale view, refused and logged by the caller.
        CONDUIT_RETURN_IF_ERROR(TakeLeaderEpoch(name, static_cast<int32_t>(p), a->leader_epoch));
      }
      AssignReplicaRole(*topic, static_cast<int32_t>(p), *a,
                        p < assignment.partition_revisions.size() ? assignment.partition_revisions[p]
                                                                  : 0);
    }
  }
  const int64_t revision = view->revision;
  {
    absl::MutexLock lock(&view_mu_);
    view_ = std::move(view);
  }
  applied_revision_.store(revision);
  return absl::OkStatus();
}

absl::Status Broker::MaterializeTopic(const TopicAssignment& assignment) {
  const TopicMeta& meta = assignment.meta;
  auto local = FindTopic(meta.name);
  if (local.ok() && (*local)->id != meta.id) {  // a topic of that name deleted and made again
    CONDUIT_RETURN_IF_ERROR(RemoveTopic(*local));
    local = absl::NotFoundError("replaced");
  }
  if (!local.ok()) {
    CONDUIT_RETURN_IF_ERROR(store_->CreateTopic(meta));
    ids_->NoteInUse(meta.id);
    absl::MutexLock lock(&mu_);
    topics_.emplace(meta.name, std::make_shared<TopicState>(meta));
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

absl::Status Broker::CheckServing(const TopicState& topic, int32_t partition, bool write) const {
  // The common case, without the view: the applied view has this broker lead the partition at
  // its epoch (its role says so), and for a write it may lead. Else the view says why not.
  if (const PartitionLog::Serving s = topic.partitions[partition].serving();
      s.leads && (!write || (cluster_->LeaseValid() &&
                             applied_revision_.load() >= cluster_->RegistrationRevision()))) {
    return absl::OkStatus();
  }
  const std::shared_ptr<const ClusterView> view = AppliedView();
  const PartitionAssignment* a = view ? view->FindPartition(topic.name, partition) : nullptr;
  const TopicAssignment* t = view ? view->FindTopic(topic.name) : nullptr;
  if (a == nullptr || t == nullptr || t->meta.id != topic.id) {
    return absl::UnavailableError(absl::StrFormat(
        "%s/%d is not placed on a broker yet; retry shortly", topic.name, partition));
  }
  const int32_t self = cluster_->self();
  if (a->leader == kNoBroker) {
    return absl::UnavailableError(absl::StrFormat(
        "%s/%d is offline: its leader's broker is gone (epoch %d); retry after GetMetadata",
        topic.name, partition, a->leader_epoch));
  }
  if (a->leader != self) {
    auto leader = view->brokers.find(a->leader);
    const std::string address = leader == view->brokers.end() ? "" : leader->second.address;
    return NotLeaderError(self, topic.name, partition,
                          LeaderHint{a->leader, address, a->leader_epoch});
  }
  const PartitionLog::Serving serving = topic.partitions[partition].serving();
  if (serving.leader_epoch != a->leader_epoch) {
    return absl::UnavailableError(
        absl::StrFormat("broker %d is taking over %s/%d at epoch %d; retry shortly", self,
                        topic.name, partition, a->leader_epoch));
  }
  // The partition already follows a newer view that is still being applied (roles change
  // before the view is published): an append now would be cut off when it syncs.
  if (write && serving.follower) {
    return absl::UnavailableError(absl::StrFormat(
        "broker %d no longer leads %s/%d (a newer assignment is being applied); retry after "
        "GetMetadata",
        self, topic.name, partition));
  }
  if (write && !MayLeadUnder(view.get())) {
    if (!cluster_->LeaseValid()) {
      return absl::UnavailableError(absl::StrFormat(
          "broker %d cannot confirm its etcd lease, so it accepts no writes; its partitions may "
          "move (retry after GetMetadata)",
          self));
    }
    return absl::UnavailableError(absl::StrFormat(
        "broker %d is joining the cluster again (its lease lapsed) and has not applied the "
        "metadata since, so it accepts no writes; its partitions may have moved (retry after "
        "GetMetadata)",
        self));
  }
  return absl::OkStatus();
}

bool Broker::MayLeadUnder(const ClusterView* view) const {
  // LeaseValid() first: a registration that confirms a new lease and the revision a view must
  // reach are set together, so this order never pairs a new lease with an old registration.
  return view != nullptr && cluster_->LeaseValid() &&
         view->revision >= cluster_->RegistrationRevision();
}

std::vector<PartitionReplication> Broker::ReplicationSnapshot() const {
  std::vector<PartitionReplication> out;
  const absl::Duration now = clock_->Monotonic();
  for (const auto& topic : TopicsSnapshot()) {
    const int32_t min_insync = topic->config().min_insync_replicas;
    for (int32_t p = 0; p < topic->partition_count; ++p) {
      if (auto led = topic->partitions[p].LedReplication(now)) {
        out.push_back(PartitionReplication{topic->name, p, min_insync, *std::move(led)});
      }
    }
  }
  return out;
}

int32_t Broker::StickyPartition(TopicState& topic) const {
  const uint32_t turn = topic.sticky_cursor.fetch_add(1);
  // Round-robin over all partitions while this broker leads its turn's (a single node always).
  const auto next = static_cast<int32_t>(turn % topic.partition_count);
  if (topic.partitions[next].serving().leads) return next;
  std::vector<int32_t> led;
  if (const auto view = AppliedView()) {
    if (const TopicAssignment* t = view->FindTopic(topic.name)) {
      for (size_t p = 0; p < t->partitions.size(); ++p) {
        if (t->partitions[p] && t->partitions[p]->leader == cluster_->self()) {
          led.push_back(static_cast<int32_t>(p));
        }
      }
    }
  }
  // Leading none: any partition; the serving check then names its leader.
  if (led.empty()) return static_cast<int32_t>(turn % topic.partition_count);
  return led[turn % led.size()];
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
