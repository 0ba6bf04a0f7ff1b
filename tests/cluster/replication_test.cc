// Replicated partitions on a cluster of real processes: etcd and three conduit-broker, RF 3,
// min in-sync 2, 2 s leases, a 2 s replica lag time. Faults are real (SIGKILL, SIGSTOP).
// Invariants checked: every acknowledged record is in every later leader's log at its
// acknowledged offset; too few in-sync replicas refuse acks-all writes with nothing appended;
// a deposed leader acknowledges nothing and its solo suffix is truncated when it rejoins; the
// replicas converge (and, where read back from their data dirs, hold the same records).
// Leader SIGKILL under load from several Producers: replication_load_test.cc; a deposed leader:
// replication_deposed_test.cc.

#include <signal.h>

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cluster/replication_fixture.h"

namespace conduit::testing {
namespace {

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

// The response to an appended batch is lost (the client never saw it), the
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

// The in-sync set shrank to the leader alone, which took acks-LEADER writes,
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
  // Elected alone in sync. The other live replica holds the same log, so the new leader may
  // have added it back already: then its log shows the set growing from [next].
  const auto isr = State(f1).isr();
  if (isr.size() != 1 || isr[0] != next) {
    const std::string grew = absl::StrCat("t/0 in-sync replicas [", next, "] -> ");
    EXPECT_TRUE(Eventually([&] { return log(next).find(grew) != std::string::npos; }))
        << "alone in sync at the election; the set is now " << ::testing::PrintToString(isr);
  }
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

// The KIP-279 case: the leader is killed, its successor is killed before it
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

// Power loss, the process half (services/log_broker/tests/replica_power_loss_test.cc is the
// storage half): SIGKILL all three brokers at once and restart them; every acknowledged record
// is there (each was fsynced by every in-sync replica before its ack).
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
