// Replicated partitions on a cluster of real processes: etcd and three conduit-broker, RF 3,
// min in-sync 2, 2 s leases, a 2 s replica lag time. Faults are real (SIGKILL, SIGSTOP).
// Invariants checked: every acknowledged record is in every later leader's log at its
// acknowledged offset; too few in-sync replicas refuse acks-all writes with nothing appended;
// a deposed leader acknowledges nothing and its solo suffix is truncated when it rejoins; the
// replicas converge (and, where read back from their data dirs, hold the same records).
// Leader SIGKILL under load from several Producers: replication_load_test.cc.

#include <signal.h>

#include <iostream>
#include <map>
#include <set>
#include <stop_token>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
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

// Issue 16 test 2. The leader appends alone (acks LEADER; its followers paused), then is paused
// past its lease while a new leader is elected and takes acks-all writes; a produce sent to the
// old leader while it is paused reaches it only when it runs again, deposed. It does not
// acknowledge it, truncates its divergent suffix, catches up while writes go on at the new
// leader, and rejoins the in-sync set; the three copies, read back from their data dirs, are
// then identical up to the high watermark and hold each acknowledged record at its offset.
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
  const std::vector<std::string> solo = {"solo0", "solo1", "solo2"};
  for (const std::string& value : solo) {
    ASSERT_TRUE(Produce(old_leader, value, nullptr, logpb::ACKS_LEADER).ok());
  }
  EXPECT_EQ(Described(old_leader).log_end_offset(), 4);
  broker(old_leader).Signal(SIGSTOP);
  const absl::Time paused = absl::Now();

  absl::Mutex mu;
  std::map<int64_t, std::string> acked;  // offset → value, acknowledged by the new leader
  auto acked_count = [&] {
    absl::MutexLock lock(&mu);
    return acked.size();
  };
  // An acks-all write sent on the connection the paused broker holds: it reads it when it runs
  // again, deposed. (Acks LEADER writes as it resumes: ADeposedLeaderRejoiningAcknowledgesNoWrite,
  // disabled.)
  grpc::Status zombie_answer;
  std::jthread to_old_leader([&] {
    logpb::ProduceRequest request;
    request.set_topic("t");
    request.set_acks(logpb::ACKS_ALL);
    AddRecord(&request, "zombie", nullptr, 0);
    logpb::ProduceResponse response;
    zombie_answer = client(old_leader).Produce(request, &response, absl::Seconds(30));
  });

  broker(f1).Signal(SIGCONT);
  broker(f2).Signal(SIGCONT);
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(f1);
    return next == f1 || next == f2;
  })) << "a follower that was in sync is elected";
  // Acks-all writes through the new leader, from now until the old leader is back in sync.
  std::jthread writer([&](std::stop_token stop) {
    for (int i = 0; !stop.stop_requested(); ++i) {
      int64_t offset = -1;
      const std::string value = absl::StrCat("new", i);
      if (Produce(next, value, &offset).ok()) {
        absl::MutexLock lock(&mu);
        acked[offset] = value;
      } else {
        absl::SleepFor(absl::Milliseconds(50));  // taking over: retry shortly
      }
    }
  });
  ASSERT_TRUE(Eventually([&] { return acked_count() >= 10; }));
  // Paused past its lease by its own clock too (it counts from its last keep-alive, before the
  // pause), so that it resumes knowing it may be deposed.
  absl::SleepFor(paused + kLeaseTtl + absl::Milliseconds(500) - absl::Now());
  broker(old_leader).Signal(SIGCONT);
  to_old_leader.join();
  EXPECT_FALSE(zombie_answer.ok()) << "acknowledged by the deposed leader";
  ASSERT_TRUE(Eventually([&] { return State(next).isr_size() == 3; }, absl::Seconds(30)))
      << "the old leader rejoins the in-sync set";
  const size_t at_rejoin = acked_count();
  ASSERT_TRUE(Eventually([&] { return acked_count() >= at_rejoin + 10; }))
      << "writes go on with the old leader back in sync";
  writer.request_stop();
  writer.join();

  const int64_t end = acked.rbegin()->first + 1;
  ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, end); }))
      << "the old leader cut its solo suffix and caught up";
  const int64_t hw = Described(next).high_watermark();
  RecordsChecksum served;
  ASSERT_TRUE(ServedChecksum(next, 0, &served).ok());
  EXPECT_EQ(served.records(), hw);

  StopAllBrokers();
  std::map<int32_t, StoredPartition> copies;
  for (int32_t id = 1; id <= 3; ++id) {
    auto copy = StoredCopy(id, 0, hw);
    ASSERT_TRUE(copy.ok()) << "broker " << id << ": " << copy.status();
    EXPECT_EQ(copy->records.size(), static_cast<size_t>(hw)) << "broker " << id;
    EXPECT_EQ(copy->log_end_offset, hw) << "broker " << id << ": nothing past the high watermark";
    EXPECT_EQ(copy->checksum, served.value()) << "broker " << id << " holds what the leader serves";
    copies[id] = *std::move(copy);
  }
  // The log: "shared", the solo records a fetch in flight when the followers paused carried to
  // them (a prefix), then the new leader's writes, each acknowledged one at its offset.
  const std::vector<log_broker::StoredRecord>& stored = copies[next].records;
  ASSERT_GE(stored.size(), 1u);
  EXPECT_EQ(stored[0].data.value, "shared");
  size_t kept = 0;  // solo records that survived
  while (kept < solo.size() && 1 + kept < stored.size() &&
         stored[1 + kept].data.value == solo[kept]) {
    ++kept;
  }
  std::set<std::string> values;
  for (const auto& r : stored) {
    EXPECT_TRUE(values.insert(r.data.value.value_or("")).second) << "twice: " << *r.data.value;
    if (r.offset > static_cast<int64_t>(kept)) {
      EXPECT_TRUE(absl::StartsWith(r.data.value.value_or(""), "new"))
          << "at " << r.offset << ": " << r.data.value.value_or("(none)")
          << " (the deposed leader's records are gone)";
    }
  }
  for (const auto& [offset, value] : acked) {
    ASSERT_LT(offset, static_cast<int64_t>(stored.size()));
    EXPECT_EQ(stored[offset].offset, offset);
    EXPECT_EQ(stored[offset].data.value, value) << "acknowledged at " << offset;
  }
  std::cout << kept << " of " << solo.size() << " solo records reached the followers; the "
            << "deposed leader answered the paused write: " << zombie_answer.error_code() << " "
            << zombie_answer.error_message() << "\n";
  if (kept < solo.size()) {
    EXPECT_THAT(log(old_leader),
                ::testing::HasSubstr(absl::StrCat("truncated to offset ", 1 + kept)));
  }
}

// A leader paused past its lease is deposed; when it runs again its lease is gone, and it
// registers again (a new lease), often before it has applied the view that deposed it (in one
// run: registered 14 ms after the resume, that view applied 100 ms after it). Writes sent to it
// from the moment it resumes until it answers "not the leader" must all be refused: an
// acknowledgement from it would be a lie (the record is truncated when it rejoins as a
// follower). It takes writes only under a view at least as recent as its registration
// (Broker::MayLeadUnder); without that, the first write after the resume was acknowledged and
// lost in 7 of 10 runs.
TEST_F(ReplicationTest, ADeposedLeaderRejoiningAcknowledgesNoWrite) {
  StartReplicatedCluster();
  const int32_t old_leader = Leader(1);
  ASSERT_NE(old_leader, -1);
  const int32_t f1 = old_leader % 3 + 1, f2 = f1 % 3 + 1;
  ASSERT_TRUE(Produce(old_leader, "shared").ok());
  broker(old_leader).Signal(SIGSTOP);
  const absl::Time paused = absl::Now();
  int32_t next = -1;
  ASSERT_TRUE(Eventually([&] {
    next = Leader(f1);
    return next == f1 || next == f2;
  }));
  ASSERT_TRUE(Eventually([&] { return Produce(next, "new").ok(); }));
  absl::SleepFor(paused + kLeaseTtl + absl::Milliseconds(500) - absl::Now());
  broker(old_leader).Signal(SIGCONT);
  std::vector<std::string> acknowledged;  // by the deposed leader
  std::map<std::string, int> refused;     // its answers before it knew it does not lead
  grpc::Status answer;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int i = 0; absl::Now() < deadline; ++i) {
    const std::string value = absl::StrCat("zombie", i);
    answer = Produce(old_leader, value, nullptr, logpb::ACKS_LEADER);
    if (answer.ok()) acknowledged.push_back(value);
    if (answer.error_code() == grpc::StatusCode::FAILED_PRECONDITION) break;
    if (!answer.ok()) ++refused[absl::StrCat(answer.error_code(), " ", answer.error_message())];
  }
  for (const auto& [message, n] : refused) std::cout << n << " x " << message << "\n";
  EXPECT_EQ(answer.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "it learns it does not lead: " << answer.error_message();
  EXPECT_THAT(acknowledged, ::testing::IsEmpty()) << "acknowledged by a deposed leader";
  ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, 2); }));
  std::vector<logpb::Record> records;
  ASSERT_TRUE(client(next).FetchAll("t", 0, &records).ok());
  EXPECT_EQ(records.size(), 2u) << "shared, new: nothing the deposed leader took survives";
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
