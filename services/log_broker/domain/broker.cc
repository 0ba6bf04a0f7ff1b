#include "services/log_broker/domain/broker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hash/murmur2.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/placement.h"
#include "services/log_broker/domain/validation.h"

namespace conduit::log_broker {
namespace {

// Queue accounting charges each record a little beyond its payload (offset, times, framing).
constexpr int64_t kRecordOverheadBytes = 32;

}  // namespace

Broker::Broker(LogStore* store, runtime::Runtime* runtime, BrokerObserver* observer,
               BrokerOptions options)
    : store_(store),
      clock_(runtime->clock()),
      observer_(observer),
      options_(options),
      local_ids_(options.ids ? nullptr : std::make_unique<LocalIdAllocator>()),
      ids_(options.ids ? options.ids : local_ids_.get()),
      cluster_(options.cluster),
      producers_(store, ids_),
      scope_(runtime, runtime::Pool::kStorage, options.max_queued_reads),
      pipeline_(store, observer, &scope_, &producers_,
                [&options] {
                  PipelineOptions pipeline = options.pipeline;
                  pipeline.learn_producer_epochs = options.cluster != nullptr;
                  return pipeline;
                }()),
      cleaner_(store, &pipeline_, clock_, observer, options.cleaner) {}

Broker::~Broker() {  // before the members their runs use
  scope_.StopEvery(maintenance_);
  scope_.StopEvery(isr_task_);
}

absl::Status Broker::Recover() {
  CONDUIT_RETURN_IF_ERROR(producers_.Recover());
  CONDUIT_ASSIGN_OR_RETURN(std::vector<TopicMeta> topics, store_->LoadTopics());
  {
    absl::MutexLock lock(&mu_);
    for (const TopicMeta& meta : topics) {
      CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> state, RecoverTopic(meta));
      if (meta.config.durability == Durability::kInterval) {
        pipeline_.RequestSyncEvery(meta.config.flush_interval);
      }
      ids_->NoteInUse(meta.id);
      topics_.emplace(meta.name, std::move(state));
    }
  }
  if (options_.maintenance_interval > absl::ZeroDuration()) {
    maintenance_ = scope_.Every(options_.maintenance_interval, [this] { RunMaintenance(); });
  }
  if (cluster_ != nullptr && options_.replica_lag_time > absl::ZeroDuration()) {
    isr_task_ = scope_.Every(options_.replica_lag_time / 4, [this] { MaintainInSyncReplicas(); });
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<TopicState>> Broker::RecoverTopic(const TopicMeta& meta) {
  auto state = std::make_shared<TopicState>(meta);
  for (int32_t p = 0; p < meta.partitions; ++p) {
    CONDUIT_ASSIGN_OR_RETURN(PartitionRecovery recovered, store_->RecoverPartition(meta.id, p));
    Partition& part = state->partitions[p];
    PartitionMeta pm = recovered.meta.value_or(PartitionMeta{});
    pm.next_offset = std::max(pm.next_offset, recovered.end_offset);
    if (!recovered.meta) pm.log_start_offset = recovered.first_offset;
    part.next_offset = pm.next_offset;
    absl::MutexLock plock(&part.mu);
    part.meta = pm;
    part.high_watermark = pm.next_offset;  // one replica: everything durable here
    part.leader_epoch = pm.leader_epoch;
    part.oldest_append_time = recovered.first_append_time;
    part.last_append_time = recovered.last_append_time;
    observer_->OnHighWatermark(meta.name, p, pm.next_offset);
  }
  CONDUIT_ASSIGN_OR_RETURN(auto producer_states, store_->LoadProducerStates(meta.id));
  for (auto& u : producer_states) {
    if (u.partition < 0 || u.partition >= meta.partitions) continue;
    state->partitions[u.partition].producers[u.producer_id] = std::move(u.state);
  }
  CONDUIT_ASSIGN_OR_RETURN(auto epochs, store_->LoadEpochStarts(meta.id));
  for (const auto& e : epochs) {
    if (e.partition < 0 || e.partition >= meta.partitions) continue;
    Partition& part = state->partitions[e.partition];
    absl::MutexLock lock(&part.mu);
    part.epoch_starts[e.epoch] = e.start_offset;
  }
  for (Partition& part : state->partitions) {
    // Records written before the epoch cache existed were appended at epoch 0.
    absl::MutexLock lock(&part.mu);
    const int64_t first =
        part.epoch_starts.empty() ? part.meta.next_offset : part.epoch_starts.begin()->second;
    if (first > part.meta.log_start_offset && !part.epoch_starts.contains(0)) {
      part.epoch_starts[0] = part.meta.log_start_offset;
    }
  }
  CONDUIT_ASSIGN_OR_RETURN(auto dedup, store_->LoadDedupEntries(meta.id));
  std::sort(dedup.begin(), dedup.end(), [](const auto& a, const auto& b) {
    return a.entry.append_time < b.entry.append_time;
  });
  for (const auto& d : dedup) {
    const int32_t p = d.entry.position.partition;
    if (p >= 0 && p < meta.partitions) state->partitions[p].dedup.Insert(d.event_id, d.entry);
  }
  return state;
}

absl::StatusOr<TopicSummary> Broker::CreateTopic(const std::string& name, int32_t partitions,
                                                 const TopicConfigPatch& patch,
                                                 std::optional<int32_t> requested_rf) {
  CONDUIT_RETURN_IF_ERROR(ValidateTopicName(name));
  CONDUIT_RETURN_IF_ERROR(ValidatePartitionCount(partitions));
  const std::shared_ptr<const ClusterView> view = cluster_ ? cluster_->View() : nullptr;
  const int32_t replication_factor = requested_rf.value_or(
      view != nullptr && view->brokers.size() >= 3 ? 3 : 1);
  TopicConfig config = patch.ApplyTo(TopicConfig{});
  if (!patch.min_insync_replicas) config.min_insync_replicas = replication_factor >= 3 ? 2 : 1;
  CONDUIT_RETURN_IF_ERROR(ValidateConfig(config, replication_factor));
  if (cluster_ != nullptr) {
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
  if (replication_factor != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "replication_factor %d is not within 1..1 (a single node)", replication_factor));
  }

  // admin_mu_ serializes topic changes; mu_ is held only for map access, so RocksDB work here
  // never stalls produce and fetch looking up their topics.
  absl::MutexLock admin(&admin_mu_);
  TopicMeta meta;
  {
    absl::MutexLock lock(&mu_);
    if (topics_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat("topic '", name, "' already exists"));
    }
  }
  CONDUIT_ASSIGN_OR_RETURN(TopicId id, ids_->NextTopicId());
  meta = TopicMeta{id, name, partitions, config, clock_->Now()};
  CONDUIT_RETURN_IF_ERROR(store_->CreateTopic(meta));
  if (meta.config.durability == Durability::kInterval) {
    pipeline_.RequestSyncEvery(meta.config.flush_interval);
  }
  absl::MutexLock lock(&mu_);
  topics_.emplace(name, std::make_shared<TopicState>(meta));
  return TopicSummary{meta};
}

absl::StatusOr<TopicMeta> Broker::UpdateTopicConfig(const std::string& name,
                                                    const TopicConfigPatch& patch) {
  if (cluster_ != nullptr) return UpdateClusterTopicConfig(name, patch);
  absl::MutexLock admin(&admin_mu_);
  auto topic = FindTopic(name);
  if (!topic.ok()) return topic.status();
  TopicMeta meta = (*topic)->meta();
  meta.config = patch.ApplyTo(meta.config);
  CONDUIT_RETURN_IF_ERROR(ValidateConfig(meta.config, /*replication_factor=*/1));
  CONDUIT_RETURN_IF_ERROR(store_->UpdateTopic(meta));
  (*topic)->set_config(meta.config);
  if (meta.config.durability == Durability::kInterval) {
    pipeline_.RequestSyncEvery(meta.config.flush_interval);
  }
  return meta;
}

absl::Status Broker::DeleteTopic(const std::string& name) {
  if (cluster_ != nullptr) return cluster_->DeleteTopic(name);  // ApplyView removes it here
  absl::MutexLock admin(&admin_mu_);
  auto found = FindTopic(name);
  if (!found.ok()) return found.status();
  return RemoveTopic(*std::move(found));
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
  {
    absl::MutexLock lock(&mu_);
    topics_.erase(name);
  }
  observer_->OnTopicDeleted(name, topic->partition_count);
  // Wake long-polls: their reads now fail NOT_FOUND.
  for (Partition& part : topic->partitions) part.WakeWaiters();
  return absl::OkStatus();
}

std::vector<TopicSummary> Broker::ListTopics() const {
  std::vector<TopicSummary> out;
  if (cluster_ != nullptr) {  // the cluster's topics, created here or through another broker
    if (const auto applied = AppliedView()) {
      for (const auto& [name, t] : applied->topics) out.push_back({t.meta, t.replication_factor});
    }
    return out;  // by name already
  }
  for (const auto& topic : TopicsSnapshot()) out.push_back({topic->meta()});
  std::sort(out.begin(), out.end(),
            [](const TopicSummary& a, const TopicSummary& b) { return a.meta.name < b.meta.name; });
  return out;
}

std::vector<std::shared_ptr<TopicState>> Broker::TopicsSnapshot() const {
  std::vector<std::shared_ptr<TopicState>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, topic] : topics_) out.push_back(topic);
  return out;
}

absl::StatusOr<TopicDescription> Broker::DescribeTopic(const std::string& name) const {
  auto topic = FindTopic(name);
  if (!topic.ok()) return topic.status();
  TopicDescription out{(*topic)->meta(), {}};
  const std::shared_ptr<const ClusterView> view = cluster_ ? AppliedView() : nullptr;
  if (const TopicAssignment* t = view ? view->FindTopic(name) : nullptr) {
    out.replication_factor = t->replication_factor;
  }
  const absl::Duration now = clock_->Monotonic();
  for (int32_t p = 0; p < out.meta.partitions; ++p) {
    const PartitionAssignment* a = view ? view->FindPartition(name, p) : nullptr;
    const int32_t leader = view == nullptr ? 0 : a != nullptr ? a->leader : kNoBroker;
    const Partition& part = (*topic)->partitions[p];
    absl::MutexLock lock(&part.mu);
    out.partitions.push_back(PartitionDescription{
        p, part.meta, part.high_watermark, part.leader_epoch, leader, part.oldest_append_time,
        part.last_append_time,
        part.replica.Describe(part.meta.log_start_offset, part.meta.next_offset, now)});
    if (cluster_ == nullptr) {  // a single node is broker 0, the one replica
      out.partitions.back().replication.replicas = {0};
      out.partitions.back().replication.isr = {0};
    }
  }
  return out;
}

absl::Status Broker::RunBlocking(std::function<void()> fn) {
  if (!scope_.Submit(std::move(fn))) {
    return absl::ResourceExhaustedError("storage executor is busy; retry after 10ms");
  }
  return absl::OkStatus();
}

absl::Status Broker::SetLeaderEpoch(const std::string& topic_name, int32_t partition,
                                    int32_t epoch) {
  CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, FindTopic(topic_name));
  CONDUIT_RETURN_IF_ERROR(CheckPartition(*topic, partition));
  Partition& part = topic->partitions[partition];
  absl::MutexLock lock(&part.mu);
  if (epoch < part.leader_epoch) {
    return absl::FailedPreconditionError(
        absl::StrFormat("leader epoch %d of %s/%d is older than its current epoch %d", epoch,
                        topic_name, partition, part.leader_epoch));
  }
  part.leader_epoch = epoch;
  return absl::OkStatus();
}

absl::StatusOr<ProducerInfo> Broker::InitProducer(const std::string& name) {
  if (cluster_ != nullptr) {  // ids and named epochs are the cluster's, not this broker's
    CONDUIT_ASSIGN_OR_RETURN(ProducerInfo info, cluster_->InitProducer(name));
    producers_.LearnEpoch(info.id, info.epoch);
    return info;
  }
  return producers_.Init(name);
}

void Broker::RunMaintenance() { cleaner_.RunOnce(TopicsSnapshot()); }

absl::StatusOr<std::shared_ptr<TopicState>> Broker::FindTopic(const std::string& name) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = topics_.find(name);
    if (it != topics_.end()) return it->second;
  }
  // Known to the cluster but not applied here yet: a moment, not an error to give up on.
  if (cluster_ != nullptr && cluster_->View()->FindTopic(name) != nullptr) {
    return absl::UnavailableError(absl::StrFormat(
        "topic '%s' is being set up on broker %d; retry shortly", name, cluster_->self()));
  }
  return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
}

absl::Status Broker::CheckPartition(const TopicState& topic, int32_t partition) const {
  if (partition < 0 || partition >= topic.partition_count) {
    return absl::NotFoundError(absl::StrFormat("partition %d of topic '%s' does not exist (it has %d)",
                                               partition, topic.name, topic.partition_count));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RoutedRecord>> Broker::RouteRecords(
    TopicState& topic, const TopicMeta& meta, std::vector<ProduceRecordArgs>& records,
    std::optional<int32_t>* sticky, int64_t* bytes) const {
  if (records.empty()) return absl::InvalidArgumentError("produce request has no records");
  if (records.size() > static_cast<size_t>(kMaxRecordsPerProduce)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request has %d records; the limit is %d", records.size(), kMaxRecordsPerProduce));
  }
  std::vector<RoutedRecord> routed;
  routed.reserve(records.size());
  int64_t request_bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    ProduceRecordArgs& r = records[i];
    CONDUIT_RETURN_IF_ERROR(ValidateRecord(meta, r.data, r.partition, i));
    int32_t partition;
    if (r.partition) {
      partition = *r.partition;
    } else if (r.data.key) {
      partition = hash::PartitionForKey(*r.data.key, meta.partitions);
    } else if (!r.data.event_id.empty() && meta.config.dedup_window > absl::ZeroDuration()) {
      // The dedup window is per partition: a retry must land where the first attempt did.
      partition = hash::PartitionForKey(r.data.event_id, meta.partitions);
    } else {
      if (!*sticky) *sticky = StickyPartition(topic);
      partition = **sticky;
    }
    request_bytes += static_cast<int64_t>(r.data.PayloadBytes()) + kRecordOverheadBytes;
    routed.push_back(RoutedRecord{partition, std::move(r.data)});
  }
  if (request_bytes > kMaxProduceRequestBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request is %d bytes; the limit is %d", request_bytes, kMaxProduceRequestBytes));
  }
  *bytes += request_bytes;
  return routed;
}

absl::Status Broker::CheckWritable(const TopicState& topic, const std::vector<RoutedRecord>& routed,
                                   bool acks_all,
                                   absl::flat_hash_map<int32_t, absl::Status>* checked) const {
  if (cluster_ == nullptr) return absl::OkStatus();
  for (const RoutedRecord& r : routed) {
    auto [it, fresh] = checked->try_emplace(r.partition);
    if (fresh) {
      it->second = CheckServing(topic, r.partition, /*write=*/true);
      if (it->second.ok() && acks_all) it->second = CheckInSync(topic, r.partition);
    }
    CONDUIT_RETURN_IF_ERROR(it->second);
  }
  return absl::OkStatus();
}

absl::Status Broker::Produce(const std::string& topic_name, std::vector<ProduceRecordArgs> records,
                             std::optional<ProducerArgs> producer, ProduceCallback done,
                             std::optional<Acks> acks) {
  auto topic = FindTopic(topic_name);
  if (!topic.ok()) return topic.status();
  const TopicMeta meta = (*topic)->meta();
  std::optional<int32_t> sticky;
  int64_t bytes = 0;
  auto routed = RouteRecords(**topic, meta, records, &sticky, &bytes);
  if (!routed.ok()) return routed.status();
  const bool acks_all = acks.value_or(meta.config.acks) == Acks::kAll;
  absl::flat_hash_map<int32_t, absl::Status> checked;
  CONDUIT_RETURN_IF_ERROR(CheckWritable(**topic, *routed, acks_all, &checked));
  if (cluster_ != nullptr && acks_all) done = AwaitReplication(*topic, std::move(done));
  std::optional<ProducerStamp> stamp;
  if (producer) {
    auto checked = CheckProducerArgs(*producer, *routed);
    if (!checked.ok()) return checked.status();
    stamp = *std::move(checked);
  }
  return pipeline_.Submit(*std::move(topic), *std::move(routed), std::move(stamp), bytes,
                          std::move(done));
}

void Broker::ProduceParts(const std::string& topic_name, std::vector<ProducePart> parts,
                          std::optional<Acks> acks) {
  auto topic = FindTopic(topic_name);
  if (!topic.ok()) {
    for (ProducePart& part : parts) part.done(topic.status());
    return;
  }
  const TopicMeta meta = (*topic)->meta();
  const bool acks_all = acks.value_or(meta.config.acks) == Acks::kAll;

  // One submission: the accepted parts' records in order, each part's count and callback.
  struct Group {
    std::vector<RoutedRecord> routed;
    int64_t bytes = 0;
    std::vector<std::pair<size_t, ProduceCallback>> parts;  // (records, done)
  };
  auto submit = [&](Group group) {
    if (group.parts.empty()) return;
    auto parts =
        std::make_shared<std::vector<std::pair<size_t, ProduceCallback>>>(std::move(group.parts));
    auto split = [parts](absl::StatusOr<ProduceResult> result) {
      size_t at = 0;
      for (auto& [count, done] : *parts) {
        if (!result.ok()) {
          done(result.status());
          continue;
        }
        ProduceResult mine;
        mine.append_time = result->append_time;
        mine.positions.assign(result->positions.begin() + static_cast<ptrdiff_t>(at),
                              result->positions.begin() + static_cast<ptrdiff_t>(at + count));
        at += count;
        done(std::move(mine));
      }
    };
    // Submit consumes its copy of `split` only when it queues the request.
    absl::Status refused =
        pipeline_.Submit(*topic, std::move(group.routed), std::nullopt, group.bytes, split);
    if (!refused.ok()) split(refused);  // refused up front: nothing queued, nothing called
  };

  std::optional<int32_t> sticky;
  absl::flat_hash_map<int32_t, absl::Status> checked;  // partition → CheckWritable's answer
  Group group;
  for (ProducePart& part : parts) {
    int64_t bytes = 0;
    auto routed = RouteRecords(**topic, meta, part.records, &sticky, &bytes);
    absl::Status refused = routed.status();
    if (refused.ok()) refused = CheckWritable(**topic, *routed, acks_all, &checked);
    if (!refused.ok()) {
      part.done(refused);
      continue;
    }
    // A group stays within the limits of one request.
    if (group.routed.size() + routed->size() > static_cast<size_t>(kMaxRecordsPerProduce) ||
        group.bytes + bytes > kMaxProduceRequestBytes) {
      submit(std::exchange(group, Group{}));
    }
    group.routed.insert(group.routed.end(), std::make_move_iterator(routed->begin()),
                        std::make_move_iterator(routed->end()));
    group.bytes += bytes;
    // Acks all: each part waits for its own records only.
    ProduceCallback done = std::move(part.done);
    if (cluster_ != nullptr && acks_all) done = AwaitReplication(*topic, std::move(done));
    group.parts.emplace_back(routed->size(), std::move(done));
  }
  submit(std::move(group));
}

absl::StatusOr<ProducerStamp> Broker::CheckProducerArgs(const ProducerArgs& producer,
                                                        const std::vector<RoutedRecord>& routed) {
  if (producer.producer_id.value() <= 0) {
    return absl::InvalidArgumentError("producer_id must be positive (from InitProducer)");
  }
  ProducerStamp stamp{producer.producer_id, producer.epoch, {}};
  for (const auto& [partition, base] : producer.base_sequences) {
    if (!stamp.base_sequences.emplace(partition, base).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition ", partition, " has two base sequences"));
    }
  }
  absl::flat_hash_map<int32_t, bool> touched;
  for (const RoutedRecord& r : routed) touched[r.partition] = true;
  for (const auto& [partition, unused] : touched) {
    if (!stamp.base_sequences.contains(partition)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "records go to partition ", partition, " but the request has no base sequence for it"));
    }
  }
  if (touched.size() != stamp.base_sequences.size()) {
    return absl::InvalidArgumentError(
        "the request has a base sequence for a partition none of its records go to");
  }
  return stamp;
}

}  // namespace conduit::log_broker
