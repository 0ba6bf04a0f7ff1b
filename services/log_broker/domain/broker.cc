#include "services/log_broker/domain/broker.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/placement.h"
#include "services/log_broker/domain/validation.h"

namespace conduit::log_broker {
namespace {

// One topic's state from the store: each partition's offsets, epoch and append times, its
// producer states and dedup window.
absl::StatusOr<std::shared_ptr<TopicState>> RecoverTopicState(LogStore& store,
                                                              BrokerObserver* observer,
                                                              const TopicMeta& meta) {
  auto state = std::make_shared<TopicState>(meta);
  CONDUIT_ASSIGN_OR_RETURN(auto epochs, store.LoadEpochStarts(meta.id));
  std::vector<std::map<LeaderEpoch, int64_t>> epoch_starts(meta.partitions);
  for (const auto& e : epochs) {
    if (e.partition < 0 || e.partition >= meta.partitions) continue;
    epoch_starts[e.partition][e.epoch] = e.start_offset;
  }
  for (int32_t p = 0; p < meta.partitions; ++p) {
    CONDUIT_ASSIGN_OR_RETURN(PartitionRecovery recovered, store.RecoverPartition(meta.id, p));
    PartitionMeta pm = recovered.meta.value_or(PartitionMeta{});
    pm.next_offset = std::max(pm.next_offset, recovered.end_offset);
    if (!recovered.meta) pm.log_start_offset = recovered.first_offset;
    state->partitions[p].Recover(pm, recovered.first_append_time, recovered.last_append_time,
                                 std::move(epoch_starts[p]));
    observer->OnHighWatermark(meta.name, p, pm.next_offset);
  }
  CONDUIT_ASSIGN_OR_RETURN(auto producer_states, store.LoadProducerStates(meta.id));
  for (auto& u : producer_states) {
    if (u.partition < 0 || u.partition >= meta.partitions) continue;
    state->partitions[u.partition].producers[u.producer_id] = std::move(u.state);
  }
  CONDUIT_ASSIGN_OR_RETURN(auto dedup, store.LoadDedupEntries(meta.id));
  std::sort(dedup.begin(), dedup.end(),
            [](const auto& a, const auto& b) { return a.entry.append_time < b.entry.append_time; });
  for (const auto& d : dedup) {
    const int32_t p = d.entry.position.partition;
    if (p >= 0 && p < meta.partitions) state->partitions[p].dedup.Insert(d.event_id, d.entry);
  }
  return state;
}

}  // namespace

Broker::Broker(LogStore* store, runtime::Runtime* runtime, BrokerObserver* observer,
               BrokerOptions options)
    : store_(store),
      clock_(runtime->clock()),
      observer_(observer),
      options_(options),
      local_ids_(options.ids ? nullptr : std::make_unique<LocalIdAllocator>()),
      ids_(options.ids ? options.ids : local_ids_.get()),
      producers_(store, ids_),
      local_cluster_(options.cluster ? nullptr
                                     : std::make_unique<LocalClusterMetadata>(&producers_)),
      cluster_(options.cluster ? options.cluster : local_cluster_.get()),
      topics_(cluster_),
      replicas_(&topics_, store, &pipeline_, &scope_, clock_, observer,
                ReplicaManagerOptions{options.replica_lag_time, options.ack_timeout}),
      scope_(runtime, runtime::Pool::kStorage, options.max_queued_reads),
      pipeline_(store, observer, &scope_, &producers_,
                [&options] {
                  PipelineOptions pipeline = options.pipeline;
                  pipeline.learn_producer_epochs = options.cluster != nullptr;
                  return pipeline;
                }()),
      cleaner_(store, &pipeline_, clock_, observer, options.cleaner) {
  if (local_cluster_) {
    local_cluster_->Attach(
        [this](std::shared_ptr<const ClusterView> view) { return ApplyView(std::move(view)); });
  }
}

Broker::~Broker() {  // before the members their runs use
  scope_.StopEvery(maintenance_);
  replicas_.Stop();
}

absl::Status Broker::Recover() {
  CONDUIT_RETURN_IF_ERROR(producers_.Recover());
  CONDUIT_ASSIGN_OR_RETURN(std::vector<TopicMeta> topics, store_->LoadTopics());
  for (const TopicMeta& meta : topics) {
    CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> state,
                             RecoverTopicState(*store_, observer_, meta));
    if (meta.config.durability == Durability::kInterval) {
      pipeline_.RequestSyncEvery(meta.config.flush_interval);
    }
    ids_->NoteInUse(meta.id);
    topics_.Insert(std::move(state));
  }
  if (local_cluster_) {
    // A cluster of one: its metadata is what this store holds, each partition led here at the
    // epoch it recovered.
    std::vector<TopicAssignment> recovered;
    for (const auto& topic : topics_.Snapshot()) {
      TopicAssignment& t = recovered.emplace_back();
      t.meta = topic->meta();
      for (const PartitionLog& part : topic->partitions) {
        t.partitions.push_back(LocalClusterMetadata::Sole(part.leader_epoch()));
      }
      t.partition_revisions.assign(t.partitions.size(), 0);
    }
    CONDUIT_RETURN_IF_ERROR(local_cluster_->Seed(recovered));
  }
  if (options_.maintenance_interval > absl::ZeroDuration()) {
    maintenance_ = scope_.Every(options_.maintenance_interval, [this] { RunMaintenance(); });
  }
  // A cluster of one has no followers: no in-sync set to maintain.
  if (!local_cluster_) replicas_.Start();
  return absl::OkStatus();
}

absl::StatusOr<TopicSummary> Broker::CreateTopic(const std::string& name, int32_t partitions,
                                                 const TopicConfigPatch& patch,
                                                 std::optional<int32_t> requested_rf) {
  CONDUIT_RETURN_IF_ERROR(ValidateTopicName(name));
  CONDUIT_RETURN_IF_ERROR(ValidatePartitionCount(partitions));
  const std::shared_ptr<const ClusterView> view = cluster_->View();
  const int32_t replication_factor = requested_rf.value_or(view->brokers.size() >= 3 ? 3 : 1);
  TopicConfig config = patch.ApplyTo(TopicConfig{});
  if (!patch.min_insync_replicas) config.min_insync_replicas = replication_factor >= 3 ? 2 : 1;
  CONDUIT_RETURN_IF_ERROR(ValidateConfig(config, replication_factor));
  CONDUIT_RETURN_IF_ERROR(CheckReplicationFactor(*view, replication_factor));
  if (view->FindTopic(name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("topic '", name, "' already exists"));
  }
  CONDUIT_ASSIGN_OR_RETURN(TopicId id, ids_->NextTopicId());
  CONDUIT_ASSIGN_OR_RETURN(
      TopicAssignment created,
      cluster_->CreateTopic(TopicMeta{id, name, partitions, config, clock_->Now()},
                            replication_factor));
  return TopicSummary{created.meta, created.replication_factor};
}

absl::StatusOr<TopicMeta> Broker::UpdateTopicConfig(const std::string& name,
                                                    const TopicConfigPatch& patch) {
  const std::shared_ptr<const ClusterView> view = cluster_->View();
  const TopicAssignment* t = view->FindTopic(name);
  const int32_t replication_factor = t != nullptr ? t->replication_factor : 1;
  return cluster_->UpdateTopicConfig(
      name, [&](const TopicConfig& current) -> absl::StatusOr<TopicConfig> {
        const TopicConfig config = patch.ApplyTo(current);
        CONDUIT_RETURN_IF_ERROR(ValidateConfig(config, replication_factor));
        return config;
      });
}

absl::Status Broker::DeleteTopic(const std::string& name) {
  return cluster_->DeleteTopic(name);  // ApplyView removes it here
}

absl::Status Broker::RemoveTopic(std::shared_ptr<TopicState> topic) {
  const std::string name = topic->name;
  absl::Status status;
  // Between batches, so no write to the topic is half-done when its records go.
  pipeline_.RunExclusive([&] {
    status = store_->DeleteTopic(topic->meta());
    if (status.ok()) topic->deleted.store(true);
  });
  if (!status.ok()) return status;
  topics_.Erase(name);
  observer_->OnTopicDeleted(name, topic->partition_count);
  // Wake long-polls: their reads now fail NOT_FOUND.
  for (PartitionLog& part : topic->partitions) part.WakeWaiters();
  return absl::OkStatus();
}

std::vector<TopicSummary> Broker::ListTopics() const {
  // The cluster's topics, created here or through another broker; by name.
  std::vector<TopicSummary> out;
  if (const auto applied = topics_.AppliedView()) {
    for (const auto& [name, t] : applied->topics) out.push_back({t.meta, t.replication_factor});
  }
  return out;
}

absl::StatusOr<TopicDescription> Broker::DescribeTopic(const std::string& name) const {
  auto topic = topics_.Find(name);
  if (!topic.ok()) return topic.status();
  TopicDescription out{(*topic)->meta(), {}};
  const std::shared_ptr<const ClusterView> view = topics_.AppliedView();
  if (const TopicAssignment* t = view ? view->FindTopic(name) : nullptr) {
    out.replication_factor = t->replication_factor;
  }
  const absl::Duration now = clock_->Monotonic();
  for (int32_t p = 0; p < out.meta.partitions; ++p) {
    const PartitionAssignment* a = view ? view->FindPartition(name, p) : nullptr;
    out.partitions.push_back(
        (*topic)->partitions[p].Describe(p, a != nullptr ? a->leader : kNoBroker, now));
  }
  return out;
}

absl::Status Broker::RunBlocking(std::function<void()> fn) {
  if (!scope_.Submit(std::move(fn))) {
    return absl::ResourceExhaustedError("storage executor is busy; retry after 10ms");
  }
  return absl::OkStatus();
}

absl::Status Broker::SetLeaderEpoch(const std::string& topic, int32_t partition,
                                    LeaderEpoch epoch) {
  if (!local_cluster_) {
    return absl::FailedPreconditionError("in a cluster, leader epochs come from its metadata");
  }
  return local_cluster_->SetLeaderEpoch(topic, partition, epoch);
}

absl::StatusOr<ProducerInfo> Broker::InitProducer(const std::string& name) {
  // Ids and named epochs are the cluster's, not this broker's.
  CONDUIT_ASSIGN_OR_RETURN(ProducerInfo info, cluster_->InitProducer(name));
  producers_.LearnEpoch(info.id, info.epoch);
  return info;
}

void Broker::RunMaintenance() { cleaner_.RunOnce(topics_.Snapshot()); }

}  // namespace conduit::log_broker
