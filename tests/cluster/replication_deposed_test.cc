// A deposed leader, on a cluster of real processes (etcd and three conduit-broker, RF 3, min
// in-sync 2, 2 s leases): paused past its lease while a new leader takes writes, it
// acknowledges nothing when it runs again, truncates its solo suffix and rejoins; the copies,
// read back from their data dirs, are identical. Part of the replication_test binary.

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

// The leader appends alone (acks LEADER; its followers paused), then is paused
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
// (TopicTable::MayLeadUnder); without that, the first write after the resume was acknowledged and
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

}  // namespace
}  // namespace conduit::testing
