#include "services/log_broker/domain/local_cluster.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker {

LocalClusterMetadata::LocalClusterMetadata(ProducerRegistry* producers) : producers_(producers) {
  auto view = std::make_shared<ClusterView>();
  view->brokers[0] = BrokerRegistration{0, "", ""};  // the address is the serving one
  view->controller = 0;
  view_ = std::move(view);
}

PartitionAssignment LocalClusterMetadata::Sole(LeaderEpoch epoch) {
  return PartitionAssignment{0, epoch, {0}, {0}, {}, 0};
}

std::shared_ptr<const ClusterView> LocalClusterMetadata::View() const {
  absl::MutexLock lock(&view_mu_);
  return view_;
}

absl::Status LocalClusterMetadata::Publish(ClusterView next) {
  const std::shared_ptr<const ClusterView> previous = View();
  next.revision = previous->revision + 1;
  auto published = std::make_shared<const ClusterView>(std::move(next));
  {
    absl::MutexLock lock(&view_mu_);
    view_ = published;
  }
  absl::Status applied = apply_ ? apply_(published) : absl::OkStatus();
  if (!applied.ok()) {
    absl::MutexLock lock(&view_mu_);
    view_ = previous;
  }
  return applied;
}

absl::Status LocalClusterMetadata::Seed(const std::vector<TopicAssignment>& topics) {
  absl::MutexLock change(&change_mu_);
  ClusterView next = *View();
  for (const TopicAssignment& t : topics) next.topics[t.meta.name] = t;
  return Publish(std::move(next));
}

absl::Status LocalClusterMetadata::SetLeaderEpoch(const std::string& topic, int32_t partition,
                                                  LeaderEpoch epoch) {
  absl::MutexLock change(&change_mu_);
  ClusterView next = *View();
  auto t = next.topics.find(topic);
  if (t == next.topics.end() || partition < 0 ||
      partition >= static_cast<int32_t>(t->second.partitions.size())) {
    return absl::NotFoundError(
        absl::StrFormat("partition %d of topic '%s' does not exist", partition, topic));
  }
  const LeaderEpoch current = t->second.partitions[partition]->leader_epoch;
  if (epoch < current) {
    return absl::FailedPreconditionError(
        absl::StrFormat("leader epoch %d of %s/%d is older than its current epoch %d", epoch, topic,
                        partition, current));
  }
  t->second.partitions[partition] = Sole(epoch);
  return Publish(std::move(next));
}

absl::StatusOr<TopicAssignment> LocalClusterMetadata::CreateTopic(const TopicMeta& meta,
                                                                  int32_t replication_factor) {
  if (replication_factor != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "replication_factor %d is not within 1..1 (a single node)", replication_factor));
  }
  absl::MutexLock change(&change_mu_);
  ClusterView next = *View();
  if (next.topics.contains(meta.name)) {
    return absl::AlreadyExistsError(absl::StrCat("topic '", meta.name, "' already exists"));
  }
  TopicAssignment t;
  t.meta = meta;
  t.partitions.assign(meta.partitions, Sole(LeaderEpoch(0)));
  t.partition_revisions.assign(meta.partitions, 0);
  next.topics[meta.name] = t;
  CONDUIT_RETURN_IF_ERROR(Publish(std::move(next)));
  return t;
}

absl::Status LocalClusterMetadata::DeleteTopic(const std::string& name) {
  absl::MutexLock change(&change_mu_);
  ClusterView next = *View();
  if (next.topics.erase(name) == 0) {
    return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
  }
  return Publish(std::move(next));
}

absl::StatusOr<ProducerInfo> LocalClusterMetadata::InitProducer(const std::string& name) {
  return producers_->Init(name);
}

absl::StatusOr<TopicMeta> LocalClusterMetadata::UpdateTopicConfig(
    const std::string& name,
    const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) {
  absl::MutexLock lock(&change_mu_);
  ClusterView next = *View();
  auto t = next.topics.find(name);
  if (t == next.topics.end()) {
    return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
  }
  CONDUIT_ASSIGN_OR_RETURN(t->second.meta.config, change(t->second.meta.config));
  const TopicMeta updated = t->second.meta;
  CONDUIT_RETURN_IF_ERROR(Publish(std::move(next)));
  return updated;
}

absl::StatusOr<int64_t> LocalClusterMetadata::UpdatePartitionState(TopicId, int32_t, int64_t,
                                                                   const PartitionAssignment&) {
  return absl::FailedPreconditionError(
      "a single node holds the one replica of each partition; reassignment needs cluster mode");
}

}  // namespace conduit::log_broker
