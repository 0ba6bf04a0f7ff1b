// What a follower copies from its leader (ReplicaFetch answered by the leader, ApplyReplicaData
// on the follower, each on a real RocksDbLogStore): the records exactly as the leader stored
// them, and the same bookkeeping of them — record count, payload bytes, latest event time,
// leader epoch, and the event ids deduplication looks up — so that it can take over. The
// follower reads these fields in place from the leader's encoding (LogStore::DecodeRecords)
// rather than decoding each record: this is what would show a field read wrong.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/testing/temp_dir.h"
#include "common/time/clock.h"
#include "services/log_broker/tests/replica_pair_fixture.h"

namespace conduit::log_broker {
namespace {

using replica_pair::Node;

// Produces `records` on the leader (acks leader: answered once the leader has them).
void Produce(Node& leader, std::vector<ProduceRecordArgs> records) {
  absl::Notification done;
  absl::StatusOr<ProduceResult> result;
  ASSERT_TRUE(leader.broker
                  ->Produce("t", std::move(records), std::nullopt,
                            [&](absl::StatusOr<ProduceResult> r) {
                              result = std::move(r);
                              done.Notify();
                            })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(result.ok()) << result.status();
}

ProduceRecordArgs Record(int i) {
  ProduceRecordArgs r;
  r.partition = 0;
  if (i % 3 != 0) r.data.key = "key-" + std::to_string(i % 5);
  if (i % 7 != 6) r.data.value = std::string(20 + i, static_cast<char>('a' + i % 26));
  if (i % 4 == 1) r.data.headers = {{"h", std::to_string(i)}, {"trace", "x"}};
  if (i % 2 == 0) r.data.event_time = absl::FromUnixSeconds(1'000'000 + (i * 37) % 50);
  if (i % 3 == 1) r.data.event_id = "event-" + std::to_string(i);
  return r;
}

TEST(ReplicaCopy, AFollowersRecordsAndBookkeepingAreTheLeaders) {
  conduit::testing::TempDir dir;
  time::FakeClock clock;
  runtime::Runtime runtime{&clock};
  auto view = replica_pair::View(TopicConfig{.durability = Durability::kInterval,
                                             .dedup_window = absl::Hours(1),
                                             .acks = Acks::kLeader});
  Node leader(replica_pair::kLeader, dir.Sub("leader"), nullptr, &runtime, view);
  Node follower(replica_pair::kFollower, dir.Sub("follower"), nullptr, &runtime, view);

  // Several produces and fetches, so that the copies span several fetches and chunks.
  int n = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<ProduceRecordArgs> records;
    for (int i = 0; i < 12; ++i) records.push_back(Record(n++));
    Produce(leader, std::move(records));
    replica_pair::Pump(leader, follower);
  }
  for (int i = 0; i < 5 && follower.LogEnd() < leader.LogEnd(); ++i) {
    replica_pair::Pump(leader, follower);
  }
  ASSERT_EQ(leader.LogEnd(), n);
  ASSERT_EQ(follower.LogEnd(), n);

  const PartitionMeta ours = leader.broker->DescribeTopic("t")->partitions[0].meta;
  const PartitionMeta theirs = follower.broker->DescribeTopic("t")->partitions[0].meta;
  EXPECT_EQ(theirs.record_count, ours.record_count);
  EXPECT_EQ(theirs.bytes, ours.bytes) << "payload bytes: key, value and headers";
  EXPECT_EQ(theirs.max_event_time, ours.max_event_time);
  EXPECT_EQ(theirs.leader_epoch, ours.leader_epoch);
  EXPECT_EQ(theirs, ours);

  auto expected = leader.store->Read(TopicId(7), 0, 0, n, 1000, 1 << 30);
  auto copied = follower.store->Read(TopicId(7), 0, 0, n, 1000, 1 << 30);
  ASSERT_TRUE(expected.ok() && copied.ok());
  ASSERT_EQ(copied->size(), expected->size());
  for (size_t i = 0; i < expected->size(); ++i) {
    const StoredRecord& e = (*expected)[i];
    const StoredRecord& c = (*copied)[i];
    EXPECT_EQ(c.offset, e.offset);
    EXPECT_EQ(c.append_time, e.append_time);
    EXPECT_EQ(c.leader_epoch, e.leader_epoch);
    EXPECT_EQ(c.data, e.data) << "at " << e.offset;
  }

  auto dedup_ours = leader.store->LoadDedupEntries(TopicId(7));
  auto dedup_theirs = follower.store->LoadDedupEntries(TopicId(7));
  ASSERT_TRUE(dedup_ours.ok() && dedup_theirs.ok());
  ASSERT_EQ(dedup_theirs->size(), dedup_ours->size());
  EXPECT_EQ(dedup_ours->size(), static_cast<size_t>((n + 1) / 3)) << "every event id";
  for (size_t i = 0; i < dedup_ours->size(); ++i) {
    EXPECT_EQ((*dedup_theirs)[i].event_id, (*dedup_ours)[i].event_id);
    EXPECT_EQ((*dedup_theirs)[i].entry.position, (*dedup_ours)[i].entry.position);
    EXPECT_EQ((*dedup_theirs)[i].entry.append_time, (*dedup_ours)[i].entry.append_time);
  }
}

}  // namespace
}  // namespace conduit::log_broker
