#include "services/log_broker/domain/topic_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/log_broker/domain/not_leader.h"

namespace conduit::log_broker {

absl::StatusOr<std::shared_ptr<TopicState>> TopicTable::Find(const std::string& name) const {
  if (name.empty()) return absl::InvalidArgumentError("topic name is empty");
  {
    absl::MutexLock lock(&mu_);
    auto it = topics_.find(name);
    if (it != topics_.end()) return it->second;
  }
  // Known to the cluster but not applied here yet: a moment, not an error to give up on.
  if (cluster_->View()->FindTopic(name) != nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "topic '%s' is being set up on broker %d; retry shortly", name, cluster_->self()));
  }
  return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
}

absl::Status TopicTable::CheckPartition(const TopicState& topic, int32_t partition) {
  if (partition < 0 || partition >= topic.partition_count) {
    return absl::NotFoundError(
        absl::StrFormat("partition %d of topic '%s' does not exist (it has %d)", partition,
                        topic.name, topic.partition_count));
  }
  return absl::OkStatus();
}

std::vector<std::shared_ptr<TopicState>> TopicTable::Snapshot() const {
  std::vector<std::shared_ptr<TopicState>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, topic] : topics_) out.push_back(topic);
  return out;
}

void TopicTable::Insert(std::shared_ptr<TopicState> topic) {
  absl::MutexLock lock(&mu_);
  const std::string name = topic->name;
  topics_.emplace(name, std::move(topic));
}

void TopicTable::Erase(const std::string& name) {
  absl::MutexLock lock(&mu_);
  topics_.erase(name);
}

std::shared_ptr<const ClusterView> TopicTable::AppliedView() const {
  absl::MutexLock lock(&view_mu_);
  return view_;
}

void TopicTable::Publish(std::shared_ptr<const ClusterView> view) {
  const int64_t revision = view->revision;
  {
    absl::MutexLock lock(&view_mu_);
    view_ = std::move(view);
  }
  applied_revision_.store(revision);
}

bool TopicTable::MayLeadUnder(const ClusterView* view) const {
  // LeaseValid() first: a registration that confirms a new lease and the revision a view must
  // reach are set together, so this order never pairs a new lease with an old registration.
  return view != nullptr && cluster_->LeaseValid() &&
         view->revision >= cluster_->RegistrationRevision();
}

absl::Status TopicTable::CheckServing(const TopicState& topic, int32_t partition,
                                      bool write) const {
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

int32_t TopicTable::StickyPartition(TopicState& topic) const {
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

}  // namespace conduit::log_broker
