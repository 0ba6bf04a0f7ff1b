// "Acknowledged" survives a power failure of an in-sync replica. A leader and a
// follower Broker in one process, each on a real RocksDbLogStore; the follower's store sits on a
// PowerLossFileSystem, which drops every write not yet fsynced when the power goes. Replication
// is pumped by hand (the follower's fetch → the leader's answer → the follower's append → its
// next fetch), so each step is deterministic.
//
// With sync durability a follower fsyncs before its next fetch reports the offset, so every
// acknowledged record is on its disk. The negative control — interval durability, where the
// follower counts what reached the OS without an fsync — loses acknowledged records at the same
// power failure: the test can see a loss.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/testing/power_loss_fs.h"
#include "common/testing/temp_dir.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/storage/rocksdb_log_store.h"
#include "services/log_broker/tests/replica_pair_fixture.h"

namespace conduit::log_broker {
namespace {

using conduit::testing::PowerLossFileSystem;
using conduit::testing::TempDir;
using replica_pair::kEpoch;
using replica_pair::kFollower;
using replica_pair::kLeader;
using replica_pair::Node;
using replica_pair::View;

// A file system whose WAL fsyncs wait while the gate is closed: a leader's fsync caught in the
// act; opened with Fail(), the held fsyncs (and every later one) fail as a dying disk's would.
// Syncs of other files (MANIFEST, tables) pass.
class GatedWalSyncFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  GatedWalSyncFileSystem() : FileSystemWrapper(rocksdb::FileSystem::Default()) {}
  static const char* kClassName() { return "GatedWalSyncFileSystem"; }
  const char* Name() const override { return kClassName(); }

  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void Fail() {
    absl::MutexLock lock(&mu_);
    failing_ = true;
    open_ = true;
  }
  // Waits until a WAL fsync is held at the closed gate; whether one was within 5 s.
  bool AwaitHeldSync() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&held_), absl::Seconds(5));
  }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
    if (s.ok() && absl::EndsWith(fname, ".log")) {
      *result = std::make_unique<GatedFile>(std::move(*result), this);
    }
    return s;
  }

 private:
  class GatedFile final : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    GatedFile(std::unique_ptr<rocksdb::FSWritableFile> file, GatedWalSyncFileSystem* fs)
        : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
      if (!fs_->PassGate()) return rocksdb::IOStatus::IOError("injected WAL fsync failure");
      return FSWritableFileOwnerWrapper::Sync(options, dbg);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                            rocksdb::IODebugContext* dbg) override {
      if (!fs_->PassGate()) return rocksdb::IOStatus::IOError("injected WAL fsync failure");
      return FSWritableFileOwnerWrapper::Fsync(options, dbg);
    }

   private:
    GatedWalSyncFileSystem* const fs_;
  };

  // Whether the fsync may go on (false: it fails).
  bool PassGate() {
    absl::MutexLock lock(&mu_);
    if (!open_) {
      held_ = true;
      mu_.Await(absl::Condition(&open_));
      held_ = false;
    }
    return !failing_;
  }

  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
};

class ReplicaPowerLoss : public ::testing::TestWithParam<Durability> {
 protected:
  void Start(std::shared_ptr<rocksdb::FileSystem> leader_fs = nullptr) {
    leader_ = std::make_unique<Node>(kLeader, dir_.Sub("leader"), leader_fs, &runtime_, view_);
    follower_ = std::make_unique<Node>(kFollower, dir_.Sub("follower"), fs_, &runtime_, view_);
  }

  void Pump() { replica_pair::Pump(*leader_, *follower_); }

  // A produce of one record with acks all, answered into `answer` (a refusal at once, too).
  struct Answer {
    absl::Notification done;
    absl::StatusOr<ProduceResult> result;
  };
  // Shared with the callback, which may outlive a failed test's body.
  std::shared_ptr<Answer> Send(const std::string& value) {
    auto answer = std::make_shared<Answer>();
    ProduceRecordArgs record;
    record.partition = 0;
    record.data.value = value;
    std::vector<ProduceRecordArgs> records;
    records.push_back(std::move(record));
    absl::Status submitted = leader_->broker->Produce("t", std::move(records), std::nullopt,
                                                      [answer](absl::StatusOr<ProduceResult> r) {
                                                        answer->result = std::move(r);
                                                        answer->done.Notify();
                                                      });
    if (!submitted.ok()) {
      answer->result = submitted;
      answer->done.Notify();
    }
    return answer;
  }

  // Produces one record with acks all and pumps until it is acknowledged; its offset.
  int64_t ProduceAcked(const std::string& value) {
    std::shared_ptr<Answer> answer = Send(value);
    absl::Notification& done = answer->done;
    absl::StatusOr<ProduceResult>& result = answer->result;
    // Pumped until answered: the leader's own fsync may take a while on a loaded machine, and a
    // fixed number of rounds could all come before its append.
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (!done.HasBeenNotified() && absl::Now() < give_up) {
      Pump();
      absl::SleepFor(absl::Milliseconds(1));
    }
    done.WaitForNotificationWithTimeout(absl::Seconds(5));
    EXPECT_TRUE(done.HasBeenNotified() && result.ok()) << "acknowledged";
    return result.ok() ? result->positions[0].offset : -1;
  }

  // The follower's machine loses power: what it had not fsynced is gone; it restarts.
  void FollowerPowerFailure() {
    fs_->Crash();
    follower_.reset();
    ASSERT_TRUE(fs_->SimulatePowerLoss().ok());
    follower_ = std::make_unique<Node>(kFollower, dir_.Sub("follower"), fs_, &runtime_, view_);
  }

  TempDir dir_;
  time::FakeClock clock_;  // no timer fires: interval fsyncs never run on their own
  runtime::Runtime runtime_{&clock_};
  std::shared_ptr<PowerLossFileSystem> fs_ = std::make_shared<PowerLossFileSystem>();
  std::shared_ptr<const ClusterView> view_ = View(TopicConfig{
      .durability = GetParam(), .min_insync_replicas = 2});
  std::unique_ptr<Node> leader_, follower_;
};

TEST_P(ReplicaPowerLoss, AnInSyncFollowerKeepsEveryAcknowledgedRecordThroughAPowerFailure) {
  Start();
  int64_t acked = 0;
  for (int i = 0; i < 20; ++i) {
    const int64_t offset = ProduceAcked("r" + std::to_string(i));
    ASSERT_EQ(offset, i);
    acked = offset + 1;
  }
  ASSERT_EQ(follower_->LogEnd(), acked) << "before the power failure";
  FollowerPowerFailure();
  if (GetParam() == Durability::kSync) {
    EXPECT_EQ(follower_->LogEnd(), acked)
        << "sync: the follower fsynced each batch before its fetch counted it";
  } else {
    EXPECT_LT(follower_->LogEnd(), acked)
        << "negative control: interval durability counts the follower's unsynced writes, and "
           "the power failure loses acknowledged records — the test sees a loss";
  }
}

// A leader publishes a sync batch before its own fsync, so that its followers copy the batch
// while it fsyncs; the high watermark (and so the acknowledgement) waits for that fsync too.
TEST_P(ReplicaPowerLoss, FollowersCopyASyncBatchDuringTheLeadersFsyncWhichTheAckStillWaitsFor) {
  if (GetParam() != Durability::kSync) GTEST_SKIP() << "interval batches are not fsynced";
  auto gate = std::make_shared<GatedWalSyncFileSystem>();
  Start(gate);
  ASSERT_EQ(ProduceAcked("before"), 0);

  gate->Close();
  absl::Cleanup reopen = [&] { gate->Open(); };  // a failed assertion must not strand the writer
  std::shared_ptr<Answer> answer = Send("during");
  ASSERT_TRUE(gate->AwaitHeldSync()) << "the leader's fsync of the batch is held";
  Pump();  // the follower copies the record (and fsyncs its copy)
  EXPECT_EQ(follower_->LogEnd(), 2) << "the batch is published before the leader's fsync ends";
  Pump();  // and its next fetch reports that copy as durable
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(answer->done.HasBeenNotified()) << "acknowledged before the leader's fsync";
  EXPECT_EQ(leader_->broker->DescribeTopic("t")->partitions[0].high_watermark, 1)
      << "the high watermark passed the leader's durable end";

  gate->Open();
  ASSERT_TRUE(answer->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(answer->result.ok()) << answer->result.status();
  EXPECT_EQ(answer->result->positions[0].offset, 1);
  EXPECT_EQ(leader_->broker->DescribeTopic("t")->partitions[0].high_watermark, 2);
}

// The leader's fsync of a batch its followers already copied fails: the batch is never
// acknowledged, and the high watermark stays below it although the follower reports its copy
// durable, so no consumer reads what the leader may not have.
TEST_P(ReplicaPowerLoss, ABatchWhoseLeaderFsyncFailsIsNeitherAcknowledgedNorVisible) {
  if (GetParam() != Durability::kSync) GTEST_SKIP() << "interval batches are not fsynced";
  auto gate = std::make_shared<GatedWalSyncFileSystem>();
  Start(gate);
  ASSERT_EQ(ProduceAcked("before"), 0);

  gate->Close();
  absl::Cleanup reopen = [&] { gate->Open(); };
  std::shared_ptr<Answer> answer = Send("during");
  ASSERT_TRUE(gate->AwaitHeldSync()) << "the leader's fsync of the batch is held";
  Pump();
  ASSERT_EQ(follower_->LogEnd(), 2) << "the follower copied the batch during the fsync";
  gate->Fail();
  ASSERT_TRUE(answer->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_FALSE(answer->result.ok()) << "a batch whose fsync failed was acknowledged";
  Pump();  // the follower reports its durable copy of the batch
  Pump();
  EXPECT_EQ(leader_->broker->DescribeTopic("t")->partitions[0].high_watermark, 1)
      << "the high watermark passed a batch the leader failed to fsync";
  std::shared_ptr<Answer> later = Send("after");
  ASSERT_TRUE(later->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_FALSE(later->result.ok()) << "a write accepted after a failed fsync";
}

INSTANTIATE_TEST_SUITE_P(Durability, ReplicaPowerLoss,
                         ::testing::Values(Durability::kSync, Durability::kInterval),
                         [](const auto& info) {
                           return info.param == Durability::kSync ? "Sync" : "IntervalControl";
                         });

}  // namespace
}  // namespace conduit::log_broker
