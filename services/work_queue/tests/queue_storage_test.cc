#include <gtest/gtest.h>

#include <rocksdb/db.h>

#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "services/work_queue/storage/codec.h"
#include "services/work_queue/storage/key_schema.h"
#include "services/work_queue/storage/rocksdb_queue_store.h"

namespace conduit::work_queue {
namespace {

TEST(QueueCodec, JobAndQueueRoundTrip) {
  Job job;
  job.id = 7;
  job.state = JobState::kDead;
  job.payload = std::string("p\0q", 3);
  job.headers = {Header{"a", "1"}};
  job.tenant = "acme";
  job.priority = -3;
  job.idempotency_key = "k";
  job.enqueued_at = absl::FromUnixMicros(1);
  job.ready_at = absl::FromUnixMicros(2);
  job.lease_deadline = absl::InfinitePast();
  job.attempts = {Attempt{1, "w", absl::FromUnixMicros(3), absl::FromUnixMicros(4),
                          Outcome::kNacked, "boom", FailureClass::kPermanent}};
  job.failures = 1;
  job.expiries = 2;
  job.redrives = 3;
  job.died_at = absl::FromUnixMicros(5);
  job.death_reason = "permanent failure: boom";
  EXPECT_EQ(*codec::DecodeJob(7, codec::EncodeJob(job)), job);
  job.source = JobSource{"orders", 2, 99};
  EXPECT_EQ(*codec::DecodeJob(7, codec::EncodeJob(job)), job);
  std::string bytes = codec::EncodeJob(job);
  EXPECT_FALSE(codec::DecodeJob(7, bytes.substr(0, bytes.size() - 1)).ok());

  QueueMeta q{QueueId(3), "emails", QueueConfig{}, absl::FromUnixSeconds(9)};
  q.config.backoff_multiplier = 1.5;
  q.config.max_depth = 100;
  q.config.max_ready_age = absl::Seconds(30);
  q.config.tenant_weights = {{"gold", 3}, {"silver", 1}};
  q.config.max_in_flight_per_tenant = 8;
  EXPECT_EQ(*codec::DecodeQueue(codec::EncodeQueue(q)), q);
}

// Stores written before the counters column family kept the next job id as an 11-byte key
// among the 8-byte queue keys. Opening one moves it, so ids are never reused and every key of
// the queues column family is a queue.
TEST(QueueStorage, OpeningAnOlderStoreMovesTheNextJobIdToTheCountersColumnFamily) {
  testing::TempDir dir;
  const std::string path = dir.Sub("queue");
  {
    auto store = RocksDbQueueStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    QueueWrite write;
    write.queue_id = QueueId(1);
    write.create_queue = QueueMeta{QueueId(1), "jobs", QueueConfig{}, absl::FromUnixSeconds(1)};
    ASSERT_TRUE((*store)->Write({&write}).ok());
  }
  {  // Rewrite it the old way: the counter in the queues column family.
    auto db = rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(),
                                 rocksdb_util::DefaultCfOptions(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(db->db()
                    ->Put(rocksdb::WriteOptions(), db->Find(keys::kQueuesCf).get(),
                          keys::kLegacyNextJobIdKey, codec::EncodeCounter(42))
                    .ok());
    db->ForgetHandles();
  }
  for (int open = 0; open < 2; ++open) {  // moved at the first open, and found at the second
    auto store = RocksDbQueueStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto next = (*store)->LoadNextJobId();
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(*next, 42u);
    auto queues = (*store)->LoadQueues();
    ASSERT_TRUE(queues.ok()) << queues.status();
    ASSERT_EQ(queues->size(), 1u);
    EXPECT_EQ((*queues)[0].name, "jobs");
  }
}

TEST(QueueKeys, ParseWhatTheyBuildAndRefuseOtherShapes) {
  EXPECT_EQ(keys::JobIdOfKey(keys::JobKey(QueueId(3), 77)), 77u);
  EXPECT_EQ(keys::JobIdOfKey(keys::QueueKey(QueueId(3))), std::nullopt);
  EXPECT_EQ(keys::IdempotencyKeyName(keys::IdempotencyKey(QueueId(3), "order-9")), "order-9");
  EXPECT_EQ(keys::IdempotencyKeyName("short"), std::nullopt);
  EXPECT_TRUE(keys::IsQueueKey(keys::QueueKey(QueueId(3))));
  EXPECT_FALSE(keys::IsQueueKey(keys::kLegacyNextJobIdKey));
  auto entry = codec::DecodeIdempotency(codec::EncodeIdempotency(5, absl::FromUnixMicros(9)));
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->first, 5u);
  EXPECT_EQ(entry->second, absl::FromUnixMicros(9));
  EXPECT_FALSE(codec::DecodeIdempotency("x").ok());
  EXPECT_FALSE(codec::DecodeCounter("1234567").ok());
}

}  // namespace
}  // namespace conduit::work_queue
