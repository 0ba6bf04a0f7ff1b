// A leader and a follower Broker in one process, each on a real RocksDbLogStore (over a given
// file system), under one fixed cluster view (no etcd); replication is pumped by hand, so each
// step is deterministic.

#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::log_broker::replica_pair {

inline constexpr int32_t kLeader = 1, kFollower = 2;
inline constexpr LeaderEpoch kEpoch{1};

// A cluster whose metadata is one fixed view (no etcd: these tests are about the brokers' stores).
class FixedCluster : public ClusterMetadata {
 public:
  FixedCluster(int32_t self, std::shared_ptr<const ClusterView> view)
      : self_(self), view_(std::move(view)) {}
  int32_t self() const override { return self_; }
  const std::string& cluster_name() const override { return name_; }
  std::shared_ptr<const ClusterView> View() const override { return view_; }
  bool LeaseValid() const override { return true; }
  int64_t RegistrationRevision() const override { return 0; }
  absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta&, int32_t) override {
    return absl::UnimplementedError("fixed view");
  }
  absl::Status DeleteTopic(const std::string&) override {
    return absl::UnimplementedError("fixed view");
  }
  absl::StatusOr<ProducerInfo> InitProducer(const std::string&) override {
    return absl::UnimplementedError("fixed view");
  }
  absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string&,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>&) override {
    return absl::UnimplementedError("fixed view");
  }
  absl::StatusOr<int64_t> UpdatePartitionState(TopicId, int32_t, int64_t,
                                               const PartitionAssignment&) override {
    return 0;
  }

 private:
  const int32_t self_;
  const std::shared_ptr<const ClusterView> view_;
  const std::string name_ = "replica-pair";
};

// Topic "t" (id 7), one partition led by kLeader at kEpoch, RF 2 with kFollower in sync.
inline std::shared_ptr<const ClusterView> View(const TopicConfig& config) {
  auto view = std::make_shared<ClusterView>();
  view->revision = 1;
  view->brokers[kLeader] = BrokerRegistration{kLeader, "127.0.0.1:1", "a"};
  view->brokers[kFollower] = BrokerRegistration{kFollower, "127.0.0.1:2", "b"};
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(7), "t", 1, config, absl::FromUnixSeconds(1)};
  t.replication_factor = 2;
  t.partitions.push_back(
      PartitionAssignment{kLeader, kEpoch, {kLeader, kFollower}, {kLeader, kFollower}});
  t.partition_revisions.push_back(1);
  view->topics.emplace("t", std::move(t));
  return view;
}

// One broker process: its store (over `fs` when given), cluster view and Broker.
struct Node {
  Node(int32_t id, const std::string& dir, std::shared_ptr<rocksdb::FileSystem> fs,
       runtime::Runtime* runtime, std::shared_ptr<const ClusterView> view)
      : cluster(id, view) {
    auto opened = RocksDbLogStore::Open(dir, {.file_system = fs});
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    BrokerOptions options;
    options.maintenance_interval = absl::ZeroDuration();
    options.cluster = &cluster;
    broker = std::make_unique<Broker>(store.get(), runtime, &observer, options);
    EXPECT_TRUE(broker->Recover().ok());
    EXPECT_TRUE(broker->ApplyView(view).ok());
  }
  ~Node() {
    broker.reset();
    store.reset();
  }
  int64_t LogEnd() const { return broker->DescribeTopic("t")->partitions[0].meta.next_offset; }

  FixedCluster cluster;
  BrokerObserver observer;
  std::unique_ptr<RocksDbLogStore> store;
  std::unique_ptr<Broker> broker;
};

// One round of replication: the follower fetches from its log end, the leader answers (and
// counts that end as the follower's), the follower applies the answer.
inline void Pump(Node& leader, Node& follower) {
  absl::Notification answered;
  std::vector<ReplicaFetchData> data;
  ASSERT_TRUE(leader.broker->replicas()
                  .ReplicaFetch(kFollower, follower.broker->replicas().FollowedPartitions(kLeader),
                                1 << 20, absl::ZeroDuration(),
                                [&](std::vector<ReplicaFetchData> d) {
                                  data = std::move(d);
                                  answered.Notify();
                                })
                  .ok());
  answered.WaitForNotification();
  for (ReplicaFetchData& d : data) {
    ASSERT_TRUE(d.status.ok()) << d.status;
    absl::Notification applied;
    absl::Status outcome;
    ASSERT_TRUE(follower.broker->replicas()
                    .ApplyReplicaData(std::move(d), kEpoch,
                                      [&](absl::Status s) {
                                        outcome = s;
                                        applied.Notify();
                                      })
                    .ok());
    applied.WaitForNotification();
    ASSERT_TRUE(outcome.ok()) << outcome;
  }
}

}  // namespace conduit::log_broker::replica_pair
