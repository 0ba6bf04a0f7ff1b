#pragma once

// The broker in cluster mode under test: a fake ClusterMetadata whose views the test sets, and
// a fixture that applies them (broker_cluster_test.cc, broker_replication_test.cc). The rule
// under test is the broker's; the etcd implementation has its own tests against a real etcd.

#include <atomic>
#include <map>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/log_broker/domain/not_leader.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker::testing {

class FakeCluster : public ClusterMetadata {
 public:
  int32_t self() const override { return 1; }
  const std::string& cluster_name() const override { return name_; }
  std::shared_ptr<const ClusterView> View() const override { return view; }
  bool LeaseValid() const override { return lease_valid; }
  int64_t RegistrationRevision() const override { return registration_revision; }
  absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta& meta, int32_t rf) override {
    created.push_back(meta);
    TopicAssignment t;
    t.meta = meta;
    return t;
  }
  absl::Status DeleteTopic(const std::string& name) override { return absl::OkStatus(); }
  absl::StatusOr<ProducerInfo> InitProducer(const std::string& name) override {
    return ProducerInfo{ProducerId(++producers), 0, name};
  }
  absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string& name,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<int64_t> UpdatePartitionState(TopicId, int32_t, int64_t,
                                               const PartitionAssignment&) override {
    return 0;
  }

  std::shared_ptr<ClusterView> view = std::make_shared<ClusterView>();
  std::atomic<bool> lease_valid{true};
  std::atomic<int64_t> registration_revision{0};
  std::vector<TopicMeta> created;
  int64_t producers = 100;

 private:
  std::string name_ = "test";
};

class BrokerClusterTest : public LifecycleTest {
 protected:
  BrokerClusterTest() {
    cluster_ = &fake_;
    Reopen();
    for (int32_t id : {1, 2}) {
      fake_.view->brokers[id] = BrokerRegistration{id, absl::StrCat("127.0.0.1:10", id), "i"};
    }
  }

  // Topic `name` with id `id`; partition p led by leaders[p] (kNoBroker: offline) at `epoch`.
  void SetTopic(const std::string& name, uint64_t id, std::vector<int32_t> leaders, int32_t epoch) {
    TopicAssignment t;
    t.meta = TopicMeta{TopicId(id), name, static_cast<int32_t>(leaders.size()), TopicConfig{},
                       absl::UnixEpoch()};
    for (int32_t leader : leaders) {
      t.partitions.push_back(PartitionAssignment{leader, LeaderEpoch(epoch), {leader}, {leader}});
      t.partition_revisions.push_back(1);
    }
    fake_.view->topics[name] = t;
  }
  // Applies the cluster's view as it now is. The broker keeps the object it applied; the test
  // goes on editing a copy, so an edit is a new view only once applied (as with etcd's).
  absl::Status Apply() {
    auto next = std::make_shared<ClusterView>(*fake_.view);
    next->revision = ++revision_;
    fake_.view = std::make_shared<ClusterView>(*next);
    return broker_->ApplyView(next);
  }

  // A follower's fetch of partition 0 of topic "r" (id 5) from `offset`, its log's last record at
  // `last_epoch`, the follower's view naming `current_epoch`: the leader's answer.
  ReplicaFetchData FetchAs(int32_t follower, int64_t offset, LeaderEpoch last_epoch,
                           LeaderEpoch current_epoch) {
    absl::Notification done;
    ReplicaFetchData answer;
    ReplicaFetchItem item{"r", TopicId(5), 0, offset, last_epoch, current_epoch};
    EXPECT_TRUE(broker_->replicas()
                    .ReplicaFetch(follower, {item}, 1 << 20, absl::ZeroDuration(),
                                  [&](std::vector<ReplicaFetchData> answers) {
                                    answer = std::move(answers.at(0));
                                    done.Notify();
                                  })
                    .ok());
    done.WaitForNotification();
    return answer;
  }
  // The same at leader epoch 2 (the log's and the view's), expected to be served.
  void FetchAsFollower(int32_t follower, int64_t offset) {
    const ReplicaFetchData a = FetchAs(follower, offset, LeaderEpoch(2), LeaderEpoch(2));
    EXPECT_TRUE(a.status.ok()) << a.status;
  }

  // Topic "r" (id 5), one partition led here at epoch 2 with replicas and in-sync set {1, 2, 3},
  // acks all and min in-sync 2: an append is answered once both followers have fetched past it.
  void SetReplicatedTopic() {
    TopicAssignment t;
    t.meta = TopicMeta{TopicId(5), "r", 1, TopicConfig{}, absl::UnixEpoch()};
    t.meta.config.min_insync_replicas = 2;
    t.partitions.push_back(PartitionAssignment{1, LeaderEpoch(2), {1, 2, 3}, {1, 2, 3}});
    t.partition_revisions = {1};
    t.replication_factor = 3;
    fake_.view->topics["r"] = t;
  }  // SetReplicatedTopic with acks LEADER (appends answered at once), applied, with `records`
  // records appended to its partition.
  void LeadReplicatedTopic(int records) {
    SetReplicatedTopic();
    fake_.view->topics["r"].meta.config.acks = Acks::kLeader;
    ASSERT_TRUE(Apply().ok());
    std::vector<ProduceRecordArgs> batch;
    for (int i = 0; i < records; ++i) batch.push_back(To(0, "v"));
    ASSERT_TRUE(Produce("r", std::move(batch)).ok());
  }

  // A produce whose answer is awaited later (acks all waits for the followers).
  struct Pending {
    absl::Notification done;
    absl::StatusOr<ProduceResult> result;
    bool Answered(absl::Duration wait = absl::Milliseconds(200)) {
      return done.WaitForNotificationWithTimeout(wait);
    }
  };
  // Returns once the records are appended at the leader (not yet answered: acks all).
  std::unique_ptr<Pending> ProduceAsync(std::vector<ProduceRecordArgs> records) {
    const int64_t end = Describe("r").meta.next_offset + static_cast<int64_t>(records.size());
    auto pending = std::make_unique<Pending>();
    Pending* p = pending.get();
    const absl::Status queued =
        broker_->Produce("r", std::move(records), std::nullopt, [p](auto r) {
          p->result = std::move(r);
          p->done.Notify();
        });
    EXPECT_TRUE(queued.ok()) << queued;
    for (int i = 0; i < 1000 && Describe("r").meta.next_offset < end; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(Describe("r").meta.next_offset, end) << "appended";
    return pending;
  }

  FakeCluster fake_;
  int64_t revision_ = 0;
};

}  // namespace conduit::log_broker::testing
