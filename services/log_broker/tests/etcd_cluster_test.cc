// EtcdCluster (cluster/etcd_cluster.h) against a real etcd: several in-process members, each a
// broker's view of the cluster, on one etcd with 2 s leases. The process-level tests (SIGKILL,
// SIGSTOP of conduit-broker) are in tests/cluster.

#include "services/log_broker/cluster/etcd_cluster.h"

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"

namespace conduit::log_broker::cluster {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(2);

// Polls `ready` every 20 ms (a real etcd lease must expire in some tests) up to `timeout`.
template <typename Pred>
bool Eventually(Pred ready, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.Start().ok()); }

  std::unique_ptr<EtcdCluster> Member(int32_t id) {
    EtcdClusterOptions options;
    options.endpoints = {etcd_.endpoint()};
    options.cluster = "test";
    options.broker_id = id;
    options.lease_ttl = kTtl;
    options.etcd.request_timeout = absl::Seconds(2);
    auto member = EtcdCluster::Create(options, &runtime_);
    EXPECT_TRUE(member.ok()) << member.status();
    absl::Status joined = (*member)->Join(absl::StrCat("127.0.0.1:", 9000 + id));
    EXPECT_TRUE(joined.ok()) << joined;
    return *std::move(member);
  }

  static TopicMeta Topic(const std::string& name, uint64_t id, int32_t partitions) {
    return TopicMeta{TopicId(id), name, partitions, TopicConfig{}, absl::FromUnixSeconds(1)};
  }

  static std::map<int32_t, int> Leaders(const TopicAssignment& t) {
    std::map<int32_t, int> out;
    for (const auto& p : t.partitions) ++out[p ? p->leader : -2];
    return out;
  }

  std::unique_ptr<etcd::Client> RawClient() { return *etcd::Client::Connect({etcd_.endpoint()}); }

  conduit::testing::TempDir dir_;
  conduit::testing::EtcdProcess etcd_{dir_.path()};
  runtime::Runtime runtime_;
};

TEST_F(EtcdClusterTest, FirstCandidateControlsAndPlacesTwelvePartitionsFourPerBroker) {
  auto one = Member(1), two = Member(2), three = Member(3);
  ASSERT_TRUE(Eventually([&] { return two->View()->brokers.size() == 3; }));
  EXPECT_EQ(two->View()->controller, 1);
  EXPECT_GT(two->View()->controller_epoch, 0);
  auto created = two->CreateTopic(Topic("orders", 7, 12), 1);  // through a non-controller
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(
      Leaders(*created),
      ::testing::ElementsAre(::testing::Pair(1, 4), ::testing::Pair(2, 4), ::testing::Pair(3, 4)));
  for (const auto& p : created->partitions) EXPECT_EQ(p->leader_epoch, LeaderEpoch(1));
  ASSERT_TRUE(Eventually([&] {
    const TopicAssignment* t = three->View()->FindTopic("orders");
    return t != nullptr && t->placed();
  })) << "every broker's view follows";
}

TEST_F(EtcdClusterTest, ATopicCreatedTwiceAtOnceThroughTwoBrokersHasExactlyOneWinner) {
  auto one = Member(1), two = Member(2);
  ASSERT_TRUE(Eventually([&] { return one->View()->brokers.size() == 2; }));
  for (int round = 0; round < 5; ++round) {
    const std::string name = absl::StrCat("t", round);
    absl::StatusOr<TopicAssignment> a, b;
    std::thread ta([&] { a = one->CreateTopic(Topic(name, 100 + round, 2), 1); });
    std::thread tb([&] { b = two->CreateTopic(Topic(name, 200 + round, 2), 1); });
    ta.join();
    tb.join();
    ASSERT_NE(a.ok(), b.ok()) << a.status() << " / " << b.status();
    const auto& loser = a.ok() ? b.status() : a.status();
    EXPECT_EQ(loser.code(), absl::StatusCode::kAlreadyExists) << loser;
    const TopicId winner = a.ok() ? a->meta.id : b->meta.id;
    ASSERT_TRUE(Eventually([&] {
      const TopicAssignment* t = one->View()->FindTopic(name);
      return t != nullptr && t->meta.id == winner;
    }));
  }
}

// Safety rests on the epoch compare, not on the lease: a controller whose candidacy is gone
// (paused past its lease, say) changes nothing, and the new controller's write of the same
// change goes through (the negative control: the write itself is fine).
TEST_F(EtcdClusterTest, ADeposedControllerChangesNothing) {
  auto one = Member(1), two = Member(2);
  ASSERT_TRUE(two->CreateTopic(Topic("t", 1, 2), 1).ok());
  ASSERT_TRUE(Eventually([&] {
    const TopicAssignment* t = one->View()->FindTopic("t");
    return t != nullptr && t->placed();
  }));
  auto before = one->View();
  ASSERT_EQ(before->controller, 1);
  const int64_t old_epoch = before->controller_epoch;
  const TopicAssignment& t = *before->FindTopic("t");
  // The partition broker 2 leads: the new controller has no reason to touch it.
  const int32_t p = t.partitions[0]->leader == 2 ? 0 : 1;
  PartitionChange change{"t", t.meta.id, p, t.partition_revisions[p], *t.partitions[p]};
  change.next.leader = kNoBroker;
  change.next.leader_epoch = NextEpoch(change.next.leader_epoch);

  ASSERT_TRUE(RawClient()->Revoke(one->lease()).ok());  // its candidacy and registration go
  ASSERT_TRUE(Eventually([&] { return two->View()->controller == 2; }));
  auto stale = one->WritePartitionStates(old_epoch, {change});
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(*stale) << "the deposed controller's Txn must fail";
  auto raw = RawClient()->Get(absl::StrCat("/conduit/test/partitions/1/", p));
  ASSERT_TRUE(raw.ok() && raw->kvs.size() == 1);
  EXPECT_EQ(raw->kvs[0].mod_revision, t.partition_revisions[p]) << "metadata unchanged";
  EXPECT_EQ(two->View()->FindPartition("t", p)->leader, 2);

  auto current = two->WritePartitionStates(two->View()->controller_epoch, {change});
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_TRUE(*current);
}

// An election planned while a leader was gone holds only while it is gone: once the broker
// has registered again, the controller's write fails (and the same write without that
// condition goes through: the control).
TEST_F(EtcdClusterTest, AnElectionFailsOnceTheGoneLeaderHasRegisteredAgain) {
  auto one = Member(1), two = Member(2);
  ASSERT_TRUE(one->CreateTopic(Topic("t", 1, 2), 1).ok());
  ASSERT_TRUE(Eventually([&] {
    const TopicAssignment* t = one->View()->FindTopic("t");
    return t != nullptr && t->placed() && one->View()->controller == 1;
  }));
  auto view = one->View();
  const TopicAssignment& t = *view->FindTopic("t");
  const int32_t p = t.partitions[0]->leader == 2 ? 0 : 1;
  PartitionChange change{"t", t.meta.id, p, t.partition_revisions[p], *t.partitions[p]};
  change.next.leader = kNoBroker;  // what the controller plans when broker 2 looks gone
  change.next.leader_epoch = NextEpoch(change.next.leader_epoch);
  // Broker 2 is registered (it "came back" before the write).
  auto stale = one->WritePartitionStates(view->controller_epoch, {change}, {2});
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_FALSE(*stale) << "broker 2 is registered: the election must not be written";
  EXPECT_EQ(one->View()->FindPartition("t", p)->leader, 2);
  auto unconditional = one->WritePartitionStates(view->controller_epoch, {change});
  ASSERT_TRUE(unconditional.ok()) << unconditional.status();
  EXPECT_TRUE(*unconditional);
}

TEST_F(EtcdClusterTest, ABrokerThatGoesHasItsPartitionsOfflineThenBackEachAtANewEpoch) {
  auto one = Member(1), two = Member(2);
  ASSERT_TRUE(one->CreateTopic(Topic("t", 1, 2), 1).ok());
  const TopicAssignment placed = *one->View()->FindTopic("t");
  const int32_t p2 = placed.partitions[0]->leader == 2 ? 0 : 1;
  two.reset();  // a clean stop revokes its lease at once
  ASSERT_TRUE(Eventually([&] {
    const auto* p = one->View()->FindPartition("t", p2);
    return p && p->leader == kNoBroker;
  }));
  EXPECT_EQ(one->View()->FindPartition("t", p2)->leader_epoch, LeaderEpoch(2));
  EXPECT_EQ(one->View()->FindPartition("t", 1 - p2)->leader_epoch, LeaderEpoch(1))
      << "the other is untouched";
  two = Member(2);
  ASSERT_TRUE(Eventually([&] {
    const auto* p = one->View()->FindPartition("t", p2);
    return p && p->leader == 2;
  }));
  EXPECT_EQ(one->View()->FindPartition("t", p2)->leader_epoch, LeaderEpoch(3));
}

TEST_F(EtcdClusterTest, WhenTheControllerGoesAnotherTakesOver) {
  auto one = Member(1), two = Member(2);
  ASSERT_TRUE(Eventually([&] { return two->View()->controller == 1; }));
  const int64_t first_epoch = two->View()->controller_epoch;
  one.reset();
  ASSERT_TRUE(Eventually([&] { return two->View()->controller == 2; }, kTtl + absl::Seconds(2)));
  EXPECT_GT(two->View()->controller_epoch, first_epoch);
  ASSERT_TRUE(two->CreateTopic(Topic("after", 3, 2), 1).ok()) << "the new controller places";
}

TEST_F(EtcdClusterTest, IdBlocksNeverOverlapAcrossBrokers) {
  auto one = Member(1), two = Member(2);
  std::set<uint64_t> seen;
  for (int i = 0; i < 150; ++i) {
    for (EtcdCluster* m : {one.get(), two.get()}) {
      auto id = m->NextTopicId();
      ASSERT_TRUE(id.ok()) << id.status();
      EXPECT_TRUE(seen.insert(id->value()).second) << "topic id " << id->value() << " twice";
    }
  }
  auto p1 = one->NextProducerId(), p2 = two->NextProducerId();
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_NE(*p1, *p2);
  // A named producer keeps its id and gets the next epoch wherever it initialises.
  auto first = one->InitProducer("relay");
  auto second = two->InitProducer("relay");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->id, second->id);
  EXPECT_EQ(first->epoch, 0);
  EXPECT_EQ(second->epoch, 1);
  EXPECT_NE(one->InitProducer("")->id, two->InitProducer("")->id);
}

// A restart within the old process's lease: the old registration (its lease) is revoked and
// the new process registers.
TEST_F(EtcdClusterTest, ARestartRevokesTheLeaseOfTheBrokersPreviousProcess) {
  auto raw = RawClient();
  auto stale = raw->Grant(30);
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE(raw->Put("/conduit/test/brokers/5",
                       EncodeBroker(BrokerRegistration{5, "127.0.0.1:1", "old"}, stale->id),
                       stale->id)
                  .ok());
  auto five = Member(5);
  EXPECT_EQ(raw->TimeToLive(stale->id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Eventually([&] {
    auto b = five->View()->brokers.find(5);
    return b != five->View()->brokers.end() && b->second.address == "127.0.0.1:9005";
  }));
}

// A lease the cluster counted dead (revoked here) while the broker kept running: it registers
// again, and its registration revision moves past the revocation, so only a view written after
// its keys went back satisfies the broker's serving rule (TopicTable::MayLeadUnder).
TEST_F(EtcdClusterTest, ALeaseFoundGoneRegistersAgainAtALaterRevision) {
  auto one = Member(1);
  const int64_t first = one->RegistrationRevision();
  EXPECT_GT(first, 0);
  EXPECT_GE(one->View()->revision, first) << "the view Join read shows the registration";
  auto raw = RawClient();
  auto before = raw->Get("/conduit/test/brokers/1");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(raw->Revoke(one->lease()).ok());  // deletes its keys at revision before + 1
  ASSERT_TRUE(Eventually([&] {
    const int64_t again = one->RegistrationRevision();
    return again > before->revision + 1 && again != std::numeric_limits<int64_t>::max();
  }));
  EXPECT_TRUE(one->LeaseValid());
  EXPECT_TRUE(Eventually([&] {
    auto view = one->View();
    return view->revision >= one->RegistrationRevision() && view->brokers.contains(1);
  }));
}

// etcd gone: changes fail UNAVAILABLE at once (nothing hangs), and the lease, unconfirmed, runs
// out by the broker's own clock; when etcd is back the broker joins again by itself.
TEST_F(EtcdClusterTest, WithEtcdDownChangesFailUnavailableAndTheLeaseRunsOutThenRecovers) {
  auto one = Member(1);
  ASSERT_TRUE(one->LeaseValid());
  etcd_.Kill();
  const absl::Status down = one->CreateTopic(Topic("t", 1, 1), 1).status();
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(down.message()), ::testing::HasSubstr("etcd unreachable"));
  EXPECT_TRUE(Eventually([&] { return !one->LeaseValid(); }, kTtl + absl::Seconds(2)));
  ASSERT_TRUE(etcd_.Start().ok());
  EXPECT_TRUE(Eventually([&] { return one->LeaseValid(); }, absl::Seconds(15)));
  ASSERT_TRUE(Eventually([&] { return one->View()->brokers.contains(1); }, absl::Seconds(15)));
  EXPECT_TRUE(one->CreateTopic(Topic("t", 1, 1), 1).ok());
  // Its watch came back too (re-read with backoff while etcd was away): it sees a new broker.
  auto two = Member(2);
  EXPECT_TRUE(Eventually([&] { return one->View()->brokers.contains(2); }));
}

}  // namespace
}  // namespace conduit::log_broker::cluster
