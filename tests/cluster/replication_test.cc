// Replicated partitions on a cluster of real processes: etcd and three conduit-broker, RF 3,
// min in-sync 2, 2 s leases, a 2 s replica lag time. Faults are real (SIGKILL, SIGSTOP).
// Invariants checked: every acknowledged record is in every later leader's log at its
// acknowledged offset; too few in-sync replicas refuse acks-all writes with nothing appended;
// a deposed leader's solo suffix is truncated when it rejoins; the replicas converge.

#include <signal.h>

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cluster/cluster_fixture.h"

namespace conduit::testing {
namespace {

constexpr char kLagTime[] = "2s";

class ReplicationTest : public ClusterTest {
 protected:
  void StartReplicatedCluster() {
    for (int32_t id = 1; id <= 3; ++id) {
      ASSERT_TRUE(StartBroker(id, {"--replica-lag-time", kLagTime})) << "broker " << id;
    }
    ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 3; }));
    ASSERT_TRUE(CreateTopic(client(1), "t", 1, 3).ok());
    ASSERT_TRUE(AwaitApplied("t", 1));
  }

  // The partition's state as broker `via` has applied it.
  logpb::PartitionMetadata State(int32_t via) {
    auto parts = Partitions(via, "t");
    return parts.empty() ? logpb::PartitionMetadata() : parts[0];
  }
  int32_t Leader(int32_t via) { return State(via).leader(); }

  // One record at partition 0 through broker `via` (no redirect), with `acks`.
  grpc::Status Produce(int32_t via, const std::string& value, int64_t* offset = nullptr,
                       logpb::Acks acks = logpb::ACKS_UNSPECIFIED) {
    return ProduceOne(via, "t", 0, value, offset, acks);
  }

  // Sets the topic's unclean_leader_election through broker `via`.
  grpc::Status AllowUncleanElection(int32_t via) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::UpdateTopicConfigRequest request;
    request.set_name("t");
    request.mutable_config()->set_unclean_leader_election(true);
    logpb::UpdateTopicConfigResponse response;
    return client(via).stub()->UpdateTopicConfig(&ctx, request, &response);
  }

  // DescribeTopic's view of partition 0 at broker `id`.
  logpb::PartitionInfo Described(int32_t id) { return ClusterTest::Described(id, "t", 0); }

  // Every broker in `ids` has the same log end and high watermark, at least `end`.
  bool Converged(const std::vector<int32_t>& ids, int64_t end) {
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int32_t id : ids) {
      logpb::PartitionInfo p = Described(id);
      if (p.log_end_offset() < end) return false;
      seen.emplace(p.log_end_offset(), p.high_watermark());
    }
    return seen.size() == 1 && seen.begin()->first == seen.begin()->second;
  }
};

TEST_F(ReplicationTest, AcknowledgedRecordsSurviveTheLeaderKilledAtTheirOffsets) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  EXPECT_THAT(State(1).isr(), ::testing::UnorderedElementsAre(1, 2, 3));
  std::map<int64_t, std::string> acked;  // offset → value
  for (int i = 0; i < 100; ++i) {
    int64_t offset = -1;
    const std::string value = absl::StrCat("v", i);
    ASSERT_TRUE(Produce(leader, value, &offset).ok()) << i;
    acked[offset] = value;
  }
  // Acks all: the acknowledged records are on every in-sync replica already.
  for (int32_t id = 1; id <= 3; ++id) {
    EXPECT_GE(Described(id).log_end_offset(), 100) << "broker " << id << " holds every ack";
  }
  broker(leader).Kill(SIGKILL);
  const int32_t other = leader % 3 + 1;
  const absl::Time killed = absl::Now();
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(other);
    return next != -1 && next != leader;
  }));
  EXPECT_LT(absl::Now() - killed, kLeaseTtl + absl::Seconds(2)) << "a new leader within TTL + 2 s";
  EXPECT_THAT(State(other).isr(), ::testing::Not(::testing::Contains(leader)));
  std::vector<logpb::Record> records;
  ASSERT_TRUE(Eventually([&] {
    records.clear();
    return client(next).FetchAll("t", 0, &records).ok() && records.size() >= acked.size();
  })) << "the new leader serves every acknowledged record";
  ASSERT_EQ(records.size(), acked.size()) << "exactly once";
  for (const auto& r : records) EXPECT_EQ(r.value(), acked[r.offset()]) << r.offset();
  int64_t offset = -1;
  ASSERT_TRUE(Eventually([&] { return Produce(next, "after", &offset).ok(); }))
      << "two in-sync replicas left: acks-all writes go on";
  EXPECT_EQ(offset, 100);
  const int32_t third = 6 - leader - next;
  EXPECT_TRUE(Eventually([&] { return Converged({next, third}, 101); }))
      << "the surviving replicas agree";
}

TEST_F(ReplicationTest, BelowMinInSyncAcksAllIsRefusedWithNothingAppendedAndReplicasRejoin) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  ASSERT_TRUE(Produce(leader, "first").ok());
  const int32_t f1 = leader % 3 + 1, f2 = f1 % 3 + 1;
  broker(f1).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return State(leader).isr_size() == 2; }))
      << "a stopped follower leaves the in-sync set after the lag time";
  EXPECT_THAT(State(leader).isr(), ::testing::Not(::testing::Contains(f1)));
  EXPECT_TRUE(Produce(leader, "second").ok()) << "two in sync: min_insync_replicas is met";

  broker(f2).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return State(leader).isr_size() == 1; }));
  const int64_t end_before = Described(leader).log_end_offset();
  grpc::Status refused = Produce(leader, "refused");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), ::testing::HasSubstr("min_insync_replicas is 2"));
  EXPECT_EQ(Described(leader).log_end_offset(), end_before) << "nothing appended";
  int64_t solo = -1;
  EXPECT_TRUE(Produce(leader, "leader-only", &solo, logpb::ACKS_LEADER).ok())
      << "acks LEADER does not need the in-sync set";

  broker(f1).Signal(SIGCONT);
  broker(f2).Signal(SIGCONT);
  EXPECT_TRUE(Eventually([&] { return State(leader).isr_size() == 3; }))
      << "each rejoins once caught up";
  EXPECT_TRUE(Eventually([&] { return Converged({1, 2, 3}, solo + 1); }));
  EXPECT_TRUE(Produce(leader, "third").ok());
}

TEST_F(ReplicationTest, ADeposedLeaderAcknowledgesNothingAndTruncatesItsSoloSuffix) {
  StartReplicatedCluster();
  const int32_t old_leader = Leader(1);
  ASSERT_NE(old_leader, -1);
  const int32_t f1 = old_leader % 3 + 1, f2 = f1 % 3 + 1;
  ASSERT_TRUE(Produce(old_leader, "shared").ok());
  ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, 1); }));
  // The followers pause; the leader appends alone (acks LEADER), then pauses past its lease.
  broker(f1).Signal(SIGSTOP);
  broker(f2).Signal(SIGSTOP);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Produce(old_leader, absl::StrCat("solo", i), nullptr, logpb::ACKS_LEADER).ok());
  }
  EXPECT_EQ(Described(old_leader).log_end_offset(), 4);
  broker(old_leader).Signal(SIGSTOP);
  broker(f1).Signal(SIGCONT);
  broker(f2).Signal(SIGCONT);
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(f1);
    return next == f1 || next == f2;
  })) << "a follower that was in sync is elected";
  int64_t acked = -1;
  ASSERT_TRUE(Eventually([&] { return Produce(next, "new", &acked).ok(); }));
  // A fetch already on its way when the followers paused may have carried some solo records to
  // them (the new leader then has those); the rest exist only at the old leader.
  EXPECT_LE(acked, 4);

  broker(old_leader).Signal(SIGCONT);
  ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, acked + 1); }))
      << "the old leader cut its solo suffix and caught up";
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(next).FetchAll("t", 0, &records).ok());
  ASSERT_EQ(records.size(), static_cast<size_t>(acked + 1));
  EXPECT_EQ(records.front().value(), "shared");
  EXPECT_EQ(records.back().value(), "new") << "at its acknowledged offset, once";
  if (acked < 4) {
    EXPECT_THAT(log(old_leader), ::testing::HasSubstr(absl::StrCat("truncated to offset ", acked)));
  }
}

// Issue 16 test 6: the response to an appended batch is lost (the client never saw it), the
// leader is killed, and the idempotent producer retries the same batch at the new leader: it is
// recognised from the replicated log and answered with the original offsets, appended once.
TEST_F(ReplicationTest, AnIdempotentBatchRetriedAfterFailoverIsAppendedOnce) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  logpb::InitProducerResponse producer;
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    ASSERT_TRUE(client(leader).stub()->InitProducer(&ctx, {}, &producer).ok());
  }
  auto batch = [&](int32_t base, const std::string& prefix) {
    logpb::ProduceRequest request;
    request.set_topic("t");
    request.set_producer_id(producer.producer_id());
    request.set_producer_epoch(producer.producer_epoch());
    auto* seq = request.add_sequences();
    seq->set_partition(0);
    seq->set_base_sequence(base);
    for (int i = 0; i < 3; ++i) {
      auto* r = request.add_records();
      r->set_partition(0);
      r->set_value(absl::StrCat(prefix, i));
    }
    return request;
  };
  logpb::ProduceResponse first, lost;
  ASSERT_TRUE(client(leader).Produce(batch(0, "a"), &first).ok());
  ASSERT_TRUE(client(leader).Produce(batch(3, "b"), &lost).ok())
      << "appended and acknowledged; the test plays the client that never got this answer";
  broker(leader).Kill(SIGKILL);
  const int32_t other = leader % 3 + 1;
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(other);
    return next != -1 && next != leader;
  }));
  logpb::ProduceResponse retried;
  ASSERT_TRUE(Eventually([&] { return client(next).Produce(batch(3, "b"), &retried).ok(); }));
  ASSERT_EQ(retried.positions_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(retried.positions(i).duplicate()) << i;
    EXPECT_EQ(retried.positions(i).offset(), lost.positions(i).offset()) << i;
  }
  logpb::ProduceResponse after;
  ASSERT_TRUE(client(next).Produce(batch(6, "c"), &after).ok()) << "the sequence goes on";
  EXPECT_EQ(after.positions(0).offset(), 6);
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(next).FetchAll("t", 0, &records).ok());
  ASSERT_EQ(records.size(), 9u) << "every record once";
}

// Issue 16 test 4: the in-sync set shrank to the leader alone, which took acks-LEADER writes,
// then died. Electing an out-of-sync replica would lose those writes: the partition stays
// offline — until the topic allows unclean election, which then brings it back, loses the
// leader-only record visibly, and the old leader truncates it when it returns.
TEST_F(ReplicationTest, WithOnlyTheLeaderInSyncItsDeathLeavesThePartitionOfflineUnlessUnclean) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  const int32_t f1 = leader % 3 + 1, f2 = f1 % 3 + 1;
  ASSERT_TRUE(Produce(leader, "replicated").ok());
  broker(f1).Signal(SIGSTOP);
  broker(f2).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return State(leader).isr_size() == 1; }));
  ASSERT_TRUE(Produce(leader, "leader-only", nullptr, logpb::ACKS_LEADER).ok());
  broker(leader).Kill(SIGKILL);
  broker(f1).Signal(SIGCONT);
  broker(f2).Signal(SIGCONT);
  ASSERT_TRUE(Eventually([&] { return Leader(f1) == -1; })) << "offline once its lease is gone";
  absl::SleepFor(kLeaseTtl + absl::Seconds(1));
  EXPECT_EQ(Leader(f1), -1) << "no in-sync replica is live: no clean election";
  EXPECT_THAT(State(f1).isr(), ::testing::ElementsAre(leader)) << "the in-sync set is kept";

  ASSERT_TRUE(AllowUncleanElection(f1).ok());
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(f1);
    return next == f1 || next == f2;
  })) << "unclean election brings it back";
  EXPECT_THAT(State(f1).isr(), ::testing::ElementsAre(next)) << "alone in sync";
  int64_t offset = -1;
  ASSERT_TRUE(Eventually([&] { return Produce(next, "after", &offset, logpb::ACKS_LEADER).ok(); }));
  EXPECT_EQ(offset, 1) << "the leader-only record is lost, as unclean election warns";
  EXPECT_THAT(log(f1) + log(f2), ::testing::HasSubstr("unclean"));

  ASSERT_TRUE(StartBroker(leader, {"--replica-lag-time", kLagTime}));
  // First the truncation: just restarted, the old leader's own end and high watermark (its
  // leader-only record included) can match the others' before its first fetch.
  EXPECT_TRUE(Eventually([&] {
    return log(leader).find("truncated to offset 1") != std::string::npos;
  })) << log(leader);
  ASSERT_TRUE(Eventually([&] {
    return Converged({1, 2, 3}, 2);
  })) << "the old leader truncates its leader-only record and catches up";
}

// Issue 16 test 5 (the KIP-279 case): the leader is killed, its successor is killed before it
// settles, both come back. Every acknowledged record survives and all replicas converge on one
// log, whatever each appended at which epoch.
TEST_F(ReplicationTest, TwoQuickFailoversLoseNoAcknowledgedRecordAndReplicasConverge) {
  StartReplicatedCluster();
  const int32_t first = Leader(1);
  ASSERT_NE(first, -1);
  std::map<int64_t, std::string> acked;
  for (int i = 0; i < 20; ++i) {
    int64_t offset = -1;
    ASSERT_TRUE(Produce(first, absl::StrCat("a", i), &offset).ok());
    acked[offset] = absl::StrCat("a", i);
  }
  broker(first).Kill(SIGKILL);
  const int32_t other = first % 3 + 1;
  int32_t second = -1;
  ASSERT_TRUE(Eventually([&] {
    second = Leader(other);
    return second != -1 && second != first;
  }));
  // A few writes at the successor (some may fail while it takes over), then it dies too.
  for (int i = 0; i < 5; ++i) {
    int64_t offset = -1;
    if (Produce(second, absl::StrCat("b", i), &offset).ok()) acked[offset] = absl::StrCat("b", i);
  }
  broker(second).Kill(SIGKILL);
  const int32_t third = 6 - first - second;
  ASSERT_TRUE(Eventually([&] { return Leader(third) == third; })) << "the last in-sync replica";
  ASSERT_TRUE(StartBroker(first, {"--replica-lag-time", kLagTime}));
  ASSERT_TRUE(StartBroker(second, {"--replica-lag-time", kLagTime}));
  ASSERT_TRUE(Eventually([&] { return State(third).isr_size() == 3; }, absl::Seconds(30)))
      << "both rejoin once they have truncated and caught up";
  int64_t last = -1;
  ASSERT_TRUE(Eventually([&] { return Produce(third, "c", &last).ok(); }));
  acked[last] = "c";
  ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, last + 1); }));
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(third).FetchAll("t", 0, &records).ok());
  std::map<int64_t, std::string> log_now;
  for (const auto& r : records) log_now[r.offset()] = r.value();
  for (const auto& [offset, value] : acked) {
    EXPECT_EQ(log_now[offset], value) << "acknowledged at " << offset;
  }
}

// Issue 16 test 8, the process half: SIGKILL all three brokers at once and restart them; every
// acknowledged record is there (each was fsynced by every in-sync replica before its ack).
TEST_F(ReplicationTest, AllBrokersKilledAtOnceKeepEveryAcknowledgedRecord) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  std::map<int64_t, std::string> acked;
  for (int i = 0; i < 50; ++i) {
    int64_t offset = -1;
    ASSERT_TRUE(Produce(leader, absl::StrCat("k", i), &offset).ok());
    acked[offset] = absl::StrCat("k", i);
  }
  for (int32_t id = 1; id <= 3; ++id) broker(id).Kill(SIGKILL);
  for (int32_t id = 1; id <= 3; ++id) {
    ASSERT_TRUE(StartBroker(id, {"--replica-lag-time", kLagTime})) << id;
  }
  int32_t next = -1;
  std::vector<logpb::Record> records;
  ASSERT_TRUE(Eventually(
      [&] {
        next = Leader(1);
        records.clear();
        return next != -1 && client(next).FetchAll("t", 0, &records).ok() &&
               records.size() >= acked.size();
      },
      absl::Seconds(30)));
  ASSERT_EQ(records.size(), acked.size());
  for (const auto& r : records) EXPECT_EQ(r.value(), acked[r.offset()]) << r.offset();
}

}  // namespace
}  // namespace conduit::testing
