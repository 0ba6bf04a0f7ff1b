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
  // A queue written before durability (version 2, without its last byte and flush interval)
  // reads as the defaults: sync, 100 ms.
  std::string v2 = codec::EncodeQueue(q);
  v2[0] = 2;
  v2.resize(v2.size() - 4);  // the durability byte and 100,000 us as a 3-byte varint
  EXPECT_EQ(*codec::DecodeQueue(v2), q);
  q.config.durability = QueueDurability::kInterval;
  q.config.flush_interval = absl::Milliseconds(250);
  EXPECT_EQ(*codec::DecodeQueue(codec::EncodeQueue(q)), q);
  bytes = codec::EncodeQueue(q);
  EXPECT_FALSE(codec::DecodeQueue(bytes.substr(0, bytes.size() - 1)).ok());
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

TEST(QueueCodec, IndexEntryAndLeaseRoundTrip) {
  const JobIndexEntry entry{9,  JobState::kDead,          "acme",
                            -4, absl::FromUnixMicros(11), absl::FromUnixMicros(12)};
  EXPECT_EQ(*codec::DecodeIndexEntry(9, codec::EncodeIndexEntry(entry)), entry);
  const LeaseRecord lease{9, LeaseToken("tok"), absl::FromUnixMicros(40),
                          Attempt{3, "w7", absl::FromUnixMicros(10)}};
  EXPECT_EQ(*codec::DecodeLease(9, codec::EncodeLease(lease)), lease);
  for (const std::string& bytes : {codec::EncodeIndexEntry(entry), codec::EncodeLease(lease)}) {
    EXPECT_FALSE(codec::DecodeIndexEntry(9, bytes.substr(0, bytes.size() - 1)).ok());
    EXPECT_FALSE(codec::DecodeLease(9, bytes.substr(0, bytes.size() - 1)).ok());
  }
}

// Every index entry of queue `q`, in job id order.
std::vector<JobIndexEntry> IndexOf(RocksDbQueueStore& store, QueueId q) {
  std::vector<JobIndexEntry> entries;
  EXPECT_TRUE(store
                  .ScanIndex(q,
                             [&](const JobIndexEntry& e) {
                               entries.push_back(e);
                               return absl::OkStatus();
                             })
                  .ok());
  return entries;
}

Job StoredJob(uint64_t id, JobState state) {
  Job job;
  job.id = id;
  job.state = state;
  job.payload = "payload-" + std::to_string(id);
  job.tenant = "t";
  job.priority = 2;
  job.ready_at = absl::FromUnixMicros(100 + id);
  job.attempts = {Attempt{1, "w", absl::FromUnixMicros(5)}};
  if (state == JobState::kLeased) {
    job.lease_token = LeaseToken("tok-" + std::to_string(id));
    job.lease_deadline = absl::FromUnixMicros(500);
  }
  if (state == JobState::kDead) job.died_at = absl::FromUnixMicros(7);
  return job;
}

// A lease is its own record: leasing and settling never rewrite the job (payload, history),
// and a deleted job leaves no record, index entry or lease behind.
TEST(QueueStorage, LeasesAreWrittenBesideTheJobAndDeletesRemoveAllThree) {
  testing::TempDir dir;
  auto store = *RocksDbQueueStore::Open(dir.Sub("queue"));
  const QueueId q(1);
  QueueWrite enqueue;
  enqueue.queue_id = q;
  enqueue.puts = {StoredJob(1, JobState::kQueued), StoredJob(2, JobState::kDead)};
  ASSERT_TRUE(store->Write({&enqueue}).ok());
  QueueWrite lease;
  lease.queue_id = q;
  const LeaseRecord record{1, LeaseToken("tok"), absl::FromUnixMicros(900),
                           Attempt{1, "w", absl::FromUnixMicros(800)}};
  lease.lease_puts = {record};
  ASSERT_TRUE(store->Write({&lease}).ok());
  EXPECT_EQ(*store->LoadLeases(q), std::vector<LeaseRecord>{record});
  auto jobs = store->ReadJobs(q, {1, 2, 3});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ((*jobs)[0], enqueue.puts[0]);  // as enqueued
  EXPECT_EQ((*jobs)[1], enqueue.puts[1]);
  EXPECT_EQ((*jobs)[2], std::nullopt);
  std::vector<JobIndexEntry> entries = IndexOf(*store, q);
  EXPECT_EQ(entries, (std::vector<JobIndexEntry>{JobIndexEntry::Of(enqueue.puts[0]),
                                                 JobIndexEntry::Of(enqueue.puts[1])}));
  QueueWrite ack;
  ack.queue_id = q;
  ack.deletes = {1};
  ASSERT_TRUE(store->Write({&ack}).ok());
  EXPECT_TRUE(store->LoadLeases(q)->empty());
  EXPECT_EQ((*store->ReadJobs(q, {1}))[0], std::nullopt);
  entries = IndexOf(*store, q);
  EXPECT_EQ(entries.size(), 1u);
}

// A lease reads its jobs' records in one pass when many ids lie close together, and with point
// lookups when they are few or scattered: either way each id gets its own job (or nullopt), in the
// order asked, repeated ids included.
TEST(QueueStorage, ReadJobsAnswersEveryIdInTheOrderAskedWhetherIdsAreCloseOrScattered) {
  testing::TempDir dir;
  auto store = *RocksDbQueueStore::Open(dir.Sub("queue"));
  const QueueId q(1), other(2);
  QueueWrite enqueue;
  enqueue.queue_id = q;
  for (uint64_t id : {1, 2, 3, 4, 5, 6, 7, 8, 100, 5000}) {
    enqueue.puts.push_back(StoredJob(id, JobState::kQueued));
    enqueue.puts.back().payload = "job " + std::to_string(id);
  }
  QueueWrite neighbour;  // ids just past the queue's own, under the next queue's prefix
  neighbour.queue_id = other;
  neighbour.puts = {StoredJob(9, JobState::kQueued)};
  QueueWrite ack;
  ack.queue_id = q;
  ack.deletes = {5};
  ASSERT_TRUE(store->Write({&enqueue, &neighbour}).ok());
  ASSERT_TRUE(store->Write({&ack}).ok());
  auto payload_of = [](const std::optional<Job>& job) {
    return job ? job->payload : std::string("-");
  };
  auto read = [&](const std::vector<uint64_t>& ids) {
    auto jobs = store->ReadJobs(q, ids);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    std::vector<std::string> payloads;
    for (const auto& job : *jobs) payloads.push_back(payload_of(job));
    return payloads;
  };
  using V = std::vector<std::string>;
  // Eight or more close together (one iterator): unsorted, a deleted id, a repeated id, an id
  // never written, one past the last stored id of the queue.
  EXPECT_EQ(read({4, 6, 3, 5, 6, 7, 9, 2, 8}),
            (V{"job 4", "job 6", "job 3", "-", "job 6", "job 7", "-", "job 2", "job 8"}));
  EXPECT_EQ(read({1, 2, 3, 4, 5, 6, 7, 8}),
            (V{"job 1", "job 2", "job 3", "job 4", "-", "job 6", "job 7", "job 8"}));
  // A few (point lookups).
  EXPECT_EQ(read({8}), V{"job 8"});
  EXPECT_EQ(read({9, 5, 7}), (V{"-", "-", "job 7"}));
  // Scattered.
  EXPECT_EQ(read({5000, 1, 100, 5, 1}), (V{"job 5000", "job 1", "job 100", "-", "job 1"}));
  EXPECT_EQ(read({}), V{});
}

// Deleting a queue range-deletes its keys in the same memtables where its jobs were just
// written with insert hints. RocksDB 7.8 (Debian 12) keeps one hint per prefix for point and
// range-deletion entries alike, so a hinted range deletion would start from a node of the
// other skip list (an assertion failure, or a corrupt memtable). Range deletions start at
// 8-byte queue keys, outside the hint's domain (keys longer than the prefix): this test
// aborts if they are hinted.
TEST(QueueStorage, DeletingAQueueRightAfterWritingItsJobsLeavesTheOtherQueuesWhole) {
  testing::TempDir dir;
  auto store = *RocksDbQueueStore::Open(dir.Sub("queue"));
  const QueueId gone(1), kept(2);
  QueueWrite jobs;
  jobs.queue_id = gone;
  QueueWrite others;
  others.queue_id = kept;
  for (uint64_t id = 1; id <= 200; ++id) {
    jobs.puts.push_back(StoredJob(id, JobState::kQueued));
    jobs.lease_puts.push_back(LeaseRecord{id, LeaseToken("t"), absl::FromUnixMicros(9), {}});
    others.puts.push_back(StoredJob(1000 + id, JobState::kQueued));
  }
  ASSERT_TRUE(store->Write({&jobs, &others}).ok());
  QueueWrite drop;
  drop.queue_id = gone;
  drop.drop_queue = true;
  ASSERT_TRUE(store->Write({&drop}).ok());
  QueueWrite more;  // point writes under the dropped queue's prefix after its range deletion
  more.queue_id = gone;
  more.puts = {StoredJob(201, JobState::kQueued)};
  ASSERT_TRUE(store->Write({&more}).ok());
  EXPECT_EQ(IndexOf(*store, gone).size(), 1u);
  EXPECT_TRUE(store->LoadLeases(gone)->empty());
  EXPECT_EQ(IndexOf(*store, kept).size(), 200u);
  auto read = store->ReadJobs(kept, {1001, 1200});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE((*read)[0].has_value() && (*read)[1].has_value());
}

// Stores written before the job index kept a lease inside the job's record. Opening one gives
// every job its index entry and a leased job its lease record, with the record as queued.
TEST(QueueStorage, OpeningAStoreWithoutAJobIndexBuildsIt) {
  testing::TempDir dir;
  const std::string path = dir.Sub("queue");
  const QueueId q(1);
  {  // The old layout: jobs only, no marker.
    auto db =
        rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(), rocksdb_util::DefaultCfOptions(),
                           {keys::kJobsCf, keys::kCountersCf});
    ASSERT_TRUE(db.ok()) << db.status();
    for (const Job& job : {StoredJob(1, JobState::kQueued), StoredJob(2, JobState::kLeased),
                           StoredJob(3, JobState::kDead)}) {
      ASSERT_TRUE(db->db()
                      ->Put(rocksdb::WriteOptions(), db->Find(keys::kJobsCf).get(),
                            keys::JobKey(q, job.id), codec::EncodeJob(job))
                      .ok());
    }
    db->ForgetHandles();
  }
  for (int open = 0; open < 2; ++open) {  // built at the first open, kept at the second
    auto store = RocksDbQueueStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<JobIndexEntry> entries = IndexOf(**store, q);
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].state, JobState::kQueued);
    EXPECT_EQ(entries[1].state, JobState::kQueued);  // its lease is a record of its own
    EXPECT_EQ(entries[2].state, JobState::kDead);
    auto leases = (*store)->LoadLeases(q);
    ASSERT_TRUE(leases.ok()) << leases.status();
    ASSERT_EQ(leases->size(), 1u);
    EXPECT_EQ((*leases)[0].job_id, 2u);
    EXPECT_EQ((*leases)[0].token, LeaseToken("tok-2"));
    EXPECT_EQ((*leases)[0].attempt.worker, "w");
    auto leased = (*store)->ReadJobs(q, {2});
    ASSERT_TRUE(leased.ok() && (*leased)[0].has_value());
    EXPECT_EQ((*leased)[0]->state, JobState::kQueued);
    EXPECT_TRUE((*leased)[0]->attempts.empty());  // the delivery in progress is the lease's
    EXPECT_EQ((*leased)[0]->payload, "payload-2");
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
