// A cluster of real processes: etcd and three conduit-broker, driven through generated stubs.
// Faults are real: SIGKILL, SIGSTOP/SIGCONT of a broker, etcd killed and restarted.

#include <signal.h>

#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cluster/cluster_fixture.h"

namespace conduit::testing {
namespace {

// Produces one record to `partition` through `via`, following the not-leader answer's trailing
// metadata once (what a generated-stub client does). Returns the final status.
grpc::Status ProduceFollowing(LogClient& via, const std::string& topic, int partition,
                              const std::string& value, std::string* leader_address = nullptr) {
  logpb::ProduceRequest request;
  request.set_topic(topic);
  auto* record = request.add_records();
  record->set_partition(partition);
  record->set_value(value);
  logpb::ProduceResponse response;
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  grpc::Status status = via.stub()->Produce(&ctx, request, &response);
  if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) return status;
  auto it = ctx.GetServerTrailingMetadata().find("conduit-leader-address");
  if (it == ctx.GetServerTrailingMetadata().end()) return status;
  const std::string address(it->second.data(), it->second.size());
  if (leader_address != nullptr) *leader_address = address;
  LogClient leader(address);
  grpc::ClientContext again;
  LogClient::SetDeadline(&again);
  return leader.stub()->Produce(&again, request, &response);
}

TEST_F(ClusterTest, TwelvePartitionsSpreadOverThreeBrokersAndEachServesOnlyItsOwn) {
  StartBrokers(3);
  ASSERT_TRUE(CreateTopic(client(2), "orders", 12).ok());
  ASSERT_TRUE(AwaitApplied("orders", 12));
  std::vector<logpb::PartitionMetadata> parts;
  ASSERT_TRUE(Eventually([&] { return (parts = Partitions(3, "orders")).size() == 12; }));
  std::map<int32_t, int> led;
  for (const auto& p : parts) {
    ++led[p.leader()];
    EXPECT_EQ(p.leader_epoch(), 1);
    EXPECT_THAT(p.replicas(), ::testing::ElementsAre(p.leader()));
  }
  for (int32_t id = 1; id <= 3; ++id) {
    EXPECT_GE(led[id], 3) << "broker " << id;
    EXPECT_LE(led[id], 5) << "broker " << id;
  }
  for (const auto& p : parts) {
    const int32_t other = p.leader() % 3 + 1;  // a broker that does not lead it
    std::string named;
    grpc::Status s = ProduceFollowing(client(other), "orders", p.partition(),
                                      absl::StrCat("v", p.partition()), &named);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(named, address(p.leader())) << "the refusal names the leader";
    std::vector<logpb::Record> records;
    ASSERT_TRUE(client(p.leader()).FetchAll("orders", p.partition(), &records).ok());
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].leader_epoch(), 1);
  }
  logpb::FetchResponse ignored;
  const auto& p0 = parts[0];
  grpc::Status refused = client(p0.leader() % 3 + 1).Fetch("orders", 0, 0, &ignored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr(absl::StrCat("its leader is broker ", p0.leader())));
}

TEST_F(ClusterTest, TopicsCanBeManagedThroughAnyBrokerAndBadInputChangesNothing) {
  StartBrokers(3);
  EXPECT_EQ(CreateTopic(client(1), "big", 3, /*replication_factor=*/4).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Two brokers create one name at once: exactly one wins.
  grpc::Status a, b;
  std::thread ta([&] { a = CreateTopic(client(1), "race", 2); });
  std::thread tb([&] { b = CreateTopic(client(3), "race", 2); });
  ta.join();
  tb.join();
  EXPECT_NE(a.ok(), b.ok()) << a.error_message() << " / " << b.error_message();
  EXPECT_EQ((a.ok() ? b : a).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  ASSERT_TRUE(Eventually([&] { return Partitions(2, "race").size() == 2; }));
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::ListTopicsResponse listed;
    ASSERT_TRUE(client(2).stub()->ListTopics(&ctx, {}, &listed).ok());
    ASSERT_EQ(listed.topics_size(), 1) << "the refused topic was not created";
    EXPECT_EQ(listed.topics(0).name(), "race");
  }
  {  // a config change through one broker reaches the others' view
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::UpdateTopicConfigRequest update;
    update.set_name("race");
    update.mutable_config()->set_max_record_bytes(4096);
    logpb::UpdateTopicConfigResponse updated;
    ASSERT_TRUE(client(2).stub()->UpdateTopicConfig(&ctx, update, &updated).ok());
    EXPECT_EQ(updated.topic().config().max_record_bytes(), 4096);
    ASSERT_TRUE(Eventually([&] {
      grpc::ClientContext c;
      LogClient::SetDeadline(&c);
      logpb::DescribeTopicRequest d;
      d.set_name("race");
      logpb::DescribeTopicResponse described;
      return client(1).stub()->DescribeTopic(&c, d, &described).ok() &&
             described.topic().config().max_record_bytes() == 4096;
    }));
  }
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::DeleteTopicRequest del;
  del.set_name("race");
  logpb::DeleteTopicResponse deleted;
  ASSERT_TRUE(client(3).stub()->DeleteTopic(&ctx, del, &deleted).ok());
  EXPECT_TRUE(Eventually([&] { return Metadata(1).topics_size() == 0; }));
}

TEST_F(ClusterTest, AnUnusableBrokerIdIsRefusedAtStart) {
  ASSERT_FALSE(StartBroker(-3)) << "a negative broker id must not serve";
  EXPECT_THAT(log(-3), ::testing::HasSubstr("broker id must be >= 0"));
}

TEST_F(ClusterTest, WhenTheControllerIsKilledAnotherTakesOverWithinTheLeaseTtl) {
  StartBrokers(3);
  const int32_t controller = Metadata(1).controller_id();
  ASSERT_GE(controller, 1);
  const int64_t epoch = Metadata(1).controller_epoch();
  const int32_t survivor = controller % 3 + 1;
  const absl::Time killed = absl::Now();
  broker(controller).Kill(SIGKILL);
  ASSERT_TRUE(Eventually(
      [&] {
        auto m = Metadata(survivor);
        return m.controller_id() != controller && m.controller_id() > 0;
      },
      kLeaseTtl + absl::Seconds(2)))
      << "no new controller within TTL + 2 s";
  std::cerr << "controller failover after SIGKILL: " << absl::Now() - killed << "\n";
  EXPECT_GT(Metadata(survivor).controller_epoch(), epoch);
  ASSERT_TRUE(CreateTopic(client(survivor), "after", 4).ok()) << "the new controller places";
  for (const auto& p : Partitions(survivor, "after")) EXPECT_NE(p.leader(), controller);
}

// A paused controller loses its lease and its office. Resumed, it changes nothing: every
// partition it does not lead keeps its state (same leader and epoch), and its own come back
// to it only through the new controller, at a new epoch.
TEST_F(ClusterTest, AControllerResumedAfterLosingItsLeaseChangesNothing) {
  StartBrokers(3);
  ASSERT_TRUE(CreateTopic(client(1), "t", 6).ok());
  const int32_t old = Metadata(1).controller_id();
  const int32_t other = old % 3 + 1;
  broker(old).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] {
    auto m = Metadata(other);
    return m.controller_id() != old && m.brokers_size() == 2;
  })) << "its lease expired";
  std::vector<logpb::PartitionMetadata> before;
  ASSERT_TRUE(Eventually([&] {
    before = Partitions(other, "t");
    for (const auto& p : before)
      if (p.leader() == old) return false;
    return !before.empty();
  })) << "its partitions went offline";
  broker(old).Signal(SIGCONT);
  ASSERT_TRUE(Eventually([&] {
    for (const auto& p : Partitions(other, "t"))
      if (p.leader() == -1) return false;
    return true;
  })) << "its partitions come back once it registers again";
  absl::SleepFor(kLeaseTtl);  // room for anything the resumed broker might still write
  const auto after = Partitions(other, "t");
  ASSERT_EQ(after.size(), before.size());
  for (size_t p = 0; p < after.size(); ++p) {
    if (before[p].leader() == -1) {
      EXPECT_EQ(after[p].leader(), old);
      EXPECT_EQ(after[p].leader_epoch(), before[p].leader_epoch() + 1);
    } else {
      EXPECT_EQ(after[p].leader(), before[p].leader()) << p;
      EXPECT_EQ(after[p].leader_epoch(), before[p].leader_epoch()) << p;
    }
  }
  EXPECT_NE(Metadata(other).controller_id(), old) << "it did not take the office back";
}

TEST_F(ClusterTest, ABrokerKilledAndRestartedLeadsItsPartitionsAgainWithEveryAcknowledgedRecord) {
  StartBrokers(3);
  ASSERT_TRUE(CreateTopic(client(1), "t", 3).ok());
  ASSERT_TRUE(AwaitApplied("t", 3));
  std::vector<logpb::PartitionMetadata> parts;
  ASSERT_TRUE(Eventually([&] { return (parts = Partitions(1, "t")).size() == 3; }));
  const int32_t victim = parts[0].leader();
  int acked = 0;
  for (int i = 0; i < 50; ++i) {
    acked += ProduceFollowing(client(victim), "t", 0, absl::StrCat("r", i)).ok();
  }
  ASSERT_EQ(acked, 50);
  broker(victim).Kill(SIGKILL);
  const int32_t other = victim % 3 + 1;
  ASSERT_TRUE(Eventually([&] { return Partitions(other, "t")[0].leader() == -1; }))
      << "offline once its lease expires";
  EXPECT_EQ(ProduceFollowing(client(other), "t", 0, "x").error_code(),
            grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(StartBroker(victim));
  ASSERT_TRUE(Eventually([&] { return Partitions(other, "t")[0].leader() == victim; }));
  EXPECT_EQ(Partitions(other, "t")[0].leader_epoch(), 3) << "placed 1, offline 2, back 3";
  std::vector<logpb::Record> records;
  ASSERT_TRUE(Eventually([&] {
    records.clear();
    return client(victim).FetchAll("t", 0, &records).ok();
  }));
  ASSERT_EQ(records.size(), 50u) << "every acknowledged record";
  for (int i = 0; i < 50; ++i) EXPECT_EQ(records[i].value(), absl::StrCat("r", i));
  EXPECT_TRUE(ProduceFollowing(client(other), "t", 0, "after").ok());
}

// etcd gone: metadata changes fail UNAVAILABLE naming etcd; a leader keeps taking writes until
// its lease would have expired by its own clock, then refuses them while reads go on; nothing
// acknowledged is lost, and the cluster recovers when etcd returns.
TEST_F(ClusterTest, WithEtcdDownLeadersServeUntilTheirLeaseRunsOutAndTheClusterRecovers) {
  StartBrokers(2);
  ASSERT_TRUE(CreateTopic(client(1), "t", 2).ok());
  ASSERT_TRUE(AwaitApplied("t", 2));
  std::vector<logpb::PartitionMetadata> parts;
  ASSERT_TRUE(Eventually([&] { return (parts = Partitions(1, "t")).size() == 2; }));
  const int32_t leader = parts[0].leader();
  ASSERT_TRUE(ProduceFollowing(client(leader), "t", 0, "before").ok());
  etcd_.Kill();
  grpc::Status change = CreateTopic(client(1), "u", 1);
  EXPECT_EQ(change.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(change.error_message(), ::testing::HasSubstr("etcd unreachable"));
  std::vector<std::string> acked = {"before"};
  const absl::Time down = absl::Now();
  while (absl::Now() - down < kLeaseTtl + absl::Seconds(3)) {
    const std::string v = absl::StrCat("during-", acked.size());
    if (ProduceFollowing(client(leader), "t", 0, v).ok()) acked.push_back(v);
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(ProduceFollowing(client(leader), "t", 0, "late").error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "no writes once the lease cannot be confirmed";
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(leader).FetchAll("t", 0, &records).ok()) << "reads go on";
  ASSERT_TRUE(etcd_.Start().ok());
  ASSERT_TRUE(Eventually([&] { return ProduceFollowing(client(leader), "t", 0, "back").ok(); },
                         absl::Seconds(20)))
      << "writes resume when etcd returns";
  acked.push_back("back");
  records.clear();
  ASSERT_TRUE(client(leader).FetchAll("t", 0, &records).ok());
  std::vector<std::string> values;
  for (const auto& r : records) values.push_back(r.value());
  EXPECT_EQ(values, acked) << "every acknowledged record, in order, nothing else";
  EXPECT_TRUE(CreateTopic(client(1), "u", 1).ok());
}

TEST_F(ClusterTest, WithEtcdGoneABrokerStillStopsPromptlyOnSigterm) {
  StartBrokers(1);
  // Without this test's idle channel: gRPC's graceful stop waits (up to the 5 s drain) for open
  // connections, which is the same with etcd up; measured here is what etcd's absence adds.
  clients_.erase(1);
  etcd_.Kill();
  absl::SleepFor(absl::Seconds(1));  // its periodic etcd work (ACL watch, metadata) now failing
  const absl::Time asked = absl::Now();
  const int status = broker(1).Kill(SIGTERM);
  const absl::Duration took = absl::Now() - asked;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Each etcd call on the way out is bounded (the ACL watch restart by 1 s, the lease revoke by
  // a third of the lease TTL): an orchestrator's grace period is not used up.
  EXPECT_LT(took, absl::Seconds(3)) << "a broker with etcd gone took " << took << " to stop:\n"
                                    << log(1);
}

}  // namespace
}  // namespace conduit::testing
