// EtcdCluster: the controller's guarded writes, topic changes through any broker, id blocks.

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/status/status_macros.h"
#include "services/log_broker/cluster/etcd_cluster.h"

namespace conduit::log_broker::cluster {
namespace {

using etcd::Compare;
using etcd::CompareOp;
using etcd::Op;

// etcd refuses a Txn with more than 128 compares or ops (--max-txn-ops). A batch's Txn compares
// the controller key, each change's partition key and at most one gone leader per change:
// 1 + 2 * 63 = 127.
constexpr size_t kChangesPerTxn = 63;
constexpr uint64_t kIdBlock = 64;

}  // namespace

void EtcdCluster::RunController(const std::shared_ptr<const ClusterView>& view, bool rebalance) {
  if (view->controller != options_.broker_id) return;
  int64_t epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    auto own = mirror_.find(keys_.Controller(lease_));
    // Elected through this lease's key (not a stale key of an earlier lease of ours).
    if (own == mirror_.end() || own->second.create_revision != view->controller_epoch) return;
    epoch = view->controller_epoch;
  }
  std::vector<PartitionChange> changes = PlanPartitionChanges(*view);
  if (rebalance && changes.empty()) changes = PlanPreferredLeaders(*view);
  for (size_t i = 0; i < changes.size(); i += kChangesPerTxn) {
    std::vector<PartitionChange> batch(
        changes.begin() + i, changes.begin() + std::min(changes.size(), i + kChangesPerTxn));
    auto applied = WritePartitionStates(epoch, batch, LeadersTakenAsGone(*view, batch));
    if (!applied.ok() || !*applied) return;  // the next view (or tick) plans again
  }
  if (absl::Status s = DeleteOrphanPartitions(epoch); !s.ok()) {
    spdlog::warn("controller {}: removing deleted topics' partitions failed: {}",
                 options_.broker_id, s.ToString());
  }
}

absl::StatusOr<bool> EtcdCluster::WritePartitionStates(
    int64_t epoch, const std::vector<PartitionChange>& changes, const std::set<int32_t>& gone) {
  etcd::Txn txn;
  txn.If(Compare::CreateRevision(keys_.Controller(lease()), CompareOp::kEqual, epoch));
  for (int32_t broker : gone) txn.If(Compare::Version(keys_.Broker(broker), CompareOp::kEqual, 0));
  for (const PartitionChange& c : changes) {
    const std::string key = keys_.Partition(c.topic_id, c.partition);
    txn.If(Compare::ModRevision(key, CompareOp::kEqual, c.read_revision))
        .Then(Op::Put(key, EncodePartition(c.next)));
  }
  CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
  if (result.succeeded) {
    for (const PartitionChange& c : changes) {
      if (c.unclean) {
        spdlog::warn(
            "controller {} (epoch {}): unclean election: {}/{} has no live in-sync replica; "
            "out-of-sync broker {} leads at epoch {}, and records only the lost replicas held "
            "are gone",
            options_.broker_id, epoch, c.topic, c.partition, c.next.leader,
            c.next.leader_epoch.value());
        observer_->OnUncleanElection();
        continue;
      }
      spdlog::info("controller {} (epoch {}): {}/{} leader {} at epoch {}", options_.broker_id,
                   epoch, c.topic, c.partition, c.next.leader, c.next.leader_epoch.value());
    }
  }
  return result.succeeded;
}

absl::StatusOr<int64_t> EtcdCluster::UpdatePartitionState(TopicId topic_id, int32_t partition,
                                                       int64_t read_revision,
                                                       const PartitionAssignment& next) {
  // Guarded by the state read: a new leader epoch (or the controller's change) since then makes
  // it fail, and the leader re-reads rather than overwrite it.
  const std::string key = keys_.Partition(topic_id, partition);
  etcd::Txn txn;
  txn.If(Compare::ModRevision(key, CompareOp::kEqual, read_revision))
      .Then(Op::Put(key, EncodePartition(next)));
  CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
  return result.succeeded ? result.revision : 0;
}

absl::Status EtcdCluster::DeleteOrphanPartitions(int64_t epoch) {
  std::set<uint64_t> orphans;
  {
    absl::MutexLock lock(&mu_);
    std::set<uint64_t> live;
    for (const auto& [name, t] : view_->topics) live.insert(t.meta.id.value());
    const std::string prefix = keys_.prefix() + "partitions/";
    for (auto it = mirror_.lower_bound(prefix);
         it != mirror_.end() && absl::StartsWith(it->first, prefix); ++it) {
      const std::string rest = it->first.substr(prefix.size());
      uint64_t id = 0;
      if (absl::SimpleAtoi(rest.substr(0, rest.find('/')), &id) && !live.contains(id)) {
        orphans.insert(id);
      }
    }
  }
  for (uint64_t id : orphans) {
    etcd::Txn txn;
    txn.If(Compare::CreateRevision(keys_.Controller(lease()), CompareOp::kEqual, epoch))
        .Then(Op::DeletePrefix(keys_.Partitions(TopicId(id))));
    CONDUIT_RETURN_IF_ERROR(client_->Commit(txn).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ClusterView>> EtcdCluster::WaitForView(
    const std::function<bool(const ClusterView&)>& ready, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto seen = [this, &ready]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready(*view_); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&seen), timeout)) {
    return absl::DeadlineExceededError("timed out");
  }
  return view_;
}

absl::StatusOr<TopicAssignment> EtcdCluster::CreateTopic(const TopicMeta& meta,
                                                         int32_t replication_factor) {
  const std::string key = keys_.Topic(meta.name);
  etcd::Txn txn;
  txn.If(Compare::Version(key, CompareOp::kEqual, 0))
      .Then(Op::Put(key, EncodeTopic(meta, replication_factor)));
  CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
  if (!result.succeeded) {
    return absl::AlreadyExistsError(absl::StrCat("topic '", meta.name, "' already exists"));
  }
  auto placed = WaitForView(
      [&meta](const ClusterView& v) {
        const TopicAssignment* t = v.FindTopic(meta.name);
        return t != nullptr && t->meta.id == meta.id && t->placed();
      },
      options_.placement_wait);
  if (!placed.ok()) {
    return absl::DeadlineExceededError(
        absl::StrCat("topic '", meta.name,
                     "' is created but its partitions are not placed yet (the "
                     "controller places them; is one elected?)"));
  }
  return *(*placed)->FindTopic(meta.name);
}

absl::Status EtcdCluster::DeleteTopic(const std::string& name) {
  const std::string key = keys_.Topic(name);
  etcd::Txn txn;
  txn.If(Compare::Version(key, CompareOp::kGreater, 0)).Then(Op::Delete(key));
  CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
  if (!result.succeeded)
    return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
  // Answer once this broker's view has it gone, so a CreateTopic of the name through it next
  // is not refused as existing.
  (void)WaitForView([&name](const ClusterView& v) { return v.FindTopic(name) == nullptr; },
                    options_.etcd.request_timeout);
  return absl::OkStatus();
}

absl::StatusOr<TopicMeta> EtcdCluster::UpdateTopicConfig(
    const std::string& name,
    const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) {
  const std::string key = keys_.Topic(name);
  for (int attempt = 0; attempt < 10; ++attempt) {
    CONDUIT_ASSIGN_OR_RETURN(etcd::RangeResult read, client_->Get(key));
    if (read.kvs.empty())
      return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
    CONDUIT_ASSIGN_OR_RETURN(TopicAssignment topic, DecodeTopic(read.kvs[0].value));
    CONDUIT_ASSIGN_OR_RETURN(topic.meta.config, change(topic.meta.config));
    etcd::Txn txn;
    txn.If(Compare::ModRevision(key, CompareOp::kEqual, read.kvs[0].mod_revision))
        .Then(Op::Put(key, EncodeTopic(topic.meta, topic.replication_factor)));
    CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
    if (result.succeeded) return topic.meta;
  }
  return absl::AbortedError(absl::StrCat("topic '", name, "' kept changing; try again"));
}

absl::StatusOr<ProducerInfo> EtcdCluster::InitProducer(const std::string& name) {
  if (name.size() > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("producer_name is ", name.size(), " bytes; the limit is 256"));
  }
  if (name.empty()) {
    CONDUIT_ASSIGN_OR_RETURN(ProducerId id, NextProducerId());
    return ProducerInfo{id, 0, ""};
  }
  const std::string key = keys_.Producer(name);
  for (int attempt = 0; attempt < 10; ++attempt) {
    CONDUIT_ASSIGN_OR_RETURN(etcd::RangeResult read, client_->Get(key));
    ProducerInfo next;
    int64_t read_revision = 0;
    if (read.kvs.empty()) {
      CONDUIT_ASSIGN_OR_RETURN(ProducerId id, NextProducerId());
      next = ProducerInfo{id, 0, name};
    } else {
      CONDUIT_ASSIGN_OR_RETURN(next, DecodeProducer(name, read.kvs[0].value));
      if (next.epoch == INT32_MAX) {
        return absl::ResourceExhaustedError(
            absl::StrCat("producer '", name, "' has used every epoch; use a new producer_name"));
      }
      ++next.epoch;
      read_revision = read.kvs[0].mod_revision;
    }
    etcd::Txn txn;
    txn.If(Compare::ModRevision(key, CompareOp::kEqual, read_revision))
        .Then(Op::Put(key, EncodeProducer(next)));
    CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
    if (result.succeeded) return next;
  }
  return absl::AbortedError(absl::StrCat("producer '", name, "' kept changing; try again"));
}

absl::StatusOr<TopicId> EtcdCluster::NextTopicId() {
  absl::MutexLock lock(&ids_mu_);
  CONDUIT_ASSIGN_OR_RETURN(uint64_t id, NextId(keys_.TopicIds(), &topic_ids_));
  return TopicId(id);
}

absl::StatusOr<ProducerId> EtcdCluster::NextProducerId() {
  absl::MutexLock lock(&ids_mu_);
  CONDUIT_ASSIGN_OR_RETURN(uint64_t id, NextId(keys_.ProducerIds(), &producer_ids_));
  return ProducerId(static_cast<int64_t>(id));
}

absl::StatusOr<uint64_t> EtcdCluster::NextId(const std::string& key, IdBlock* block) {
  while (block->next >= block->end) {
    CONDUIT_ASSIGN_OR_RETURN(etcd::RangeResult read, client_->Get(key));
    uint64_t next = 1;
    int64_t read_revision = 0;
    if (!read.kvs.empty()) {
      CONDUIT_ASSIGN_OR_RETURN(next, DecodeIdBlock(read.kvs[0].value));
      read_revision = read.kvs[0].mod_revision;
    }
    etcd::Txn txn;
    txn.If(Compare::ModRevision(key, CompareOp::kEqual, read_revision))
        .Then(Op::Put(key, EncodeIdBlock(next + kIdBlock)));
    CONDUIT_ASSIGN_OR_RETURN(etcd::TxnResult result, client_->Commit(txn));
    if (result.succeeded) *block = IdBlock{next, next + kIdBlock};  // else another broker won
  }
  return block->next++;
}

}  // namespace conduit::log_broker::cluster
