// What a careless or hostile client must not be able to do to the work queue: a
// selection that names ids and a filter, rates and limits outside reason, tenant weights without
// bound, delays past any sense. Each refused call changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class QueueHostileInputTest : public WorkQueueTest {
 protected:
  // Queue "q" with two dead letters: one of tenant "t1", one of "t2".
  void SetUp() override {
    Create("q");
    ASSERT_TRUE(Enqueue("q", {JobFor("a", "t1"), JobFor("b", "t2")}).ok());
    for (int i = 0; i < 2; ++i) {
      auto job = (*Lease("q"))[0];
      ids_.push_back(job.id);
      ASSERT_TRUE(Nack(job, "bad address", FailureClass::kPermanent).ok());
    }
    ASSERT_EQ(Stats().dead, 2);
  }
  absl::StatusOr<RedriveResult> Redrive(const DeadLetterSelection& s, double rate = 0) {
    return Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", s, {}, rate, cb); });
  }
  absl::StatusOr<std::vector<uint64_t>> Discard(const DeadLetterSelection& s) {
    return Wait<std::vector<uint64_t>>([&](auto cb) { queue_->Discard("q", s, "cleanup", cb); });
  }
  std::vector<uint64_t> ids_;
};

TEST_F(QueueHostileInputTest, IdsAndAFilterTogetherAreRefusedAndMoveNothing) {
  DeadLetterSelection both;
  both.ids = {ids_[0]};
  both.filter.tenant = "nobody";
  both.dry_run = false;
  auto redriven = Redrive(both);
  EXPECT_TRUE(absl::IsInvalidArgument(redriven.status())) << redriven.status();
  auto discarded = Discard(both);
  EXPECT_TRUE(absl::IsInvalidArgument(discarded.status())) << discarded.status();
  EXPECT_EQ(Stats().dead, 2) << "neither call may move the job the filter would have excluded";
  // Each alone is fine.
  both.filter = {};
  EXPECT_TRUE(Redrive(both).ok());
  EXPECT_EQ(Stats().dead, 1);
}

TEST_F(QueueHostileInputTest, RatesAndLimitsOutsideReasonAreRefused) {
  DeadLetterSelection all;
  all.dry_run = false;
  for (double rate : {std::nan(""), std::numeric_limits<double>::infinity(),
                      -std::numeric_limits<double>::infinity(), 1e-300, -1.0, 1e9}) {
    auto r = Redrive(all, rate);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << "rate " << rate << ": " << r.status();
  }
  all.limit = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(Redrive(all).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Discard(all).status()));
  EXPECT_EQ(Stats().dead, 2);
  all.limit = 1;
  auto paced = Redrive(all, 0.5);
  ASSERT_TRUE(paced.ok()) << paced.status();
  EXPECT_EQ(paced->moved.size(), 1u);
}

TEST_F(QueueHostileInputTest, TenantWeightsAreBoundedLikeTenants) {
  QueueConfigPatch many;
  many.tenant_weights.emplace();
  for (size_t i = 0; i <= kMaxTenantWeights; ++i) (*many.tenant_weights)[std::to_string(i)] = 1;
  auto created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("many", many, cb); });
  EXPECT_TRUE(absl::IsInvalidArgument(created.status())) << created.status();
  QueueConfigPatch long_name;
  long_name.tenant_weights =
      std::map<std::string, int32_t>{{std::string(kMaxTenantBytes + 1, 't'), 5}};
  created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("long", long_name, cb); });
  EXPECT_TRUE(absl::IsInvalidArgument(created.status())) << created.status();
  EXPECT_EQ(queue_->ListQueues().size(), 1u) << "only q exists";
  (*long_name.tenant_weights) = {{std::string(kMaxTenantBytes, 't'), 5}};
  created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("long", long_name, cb); });
  EXPECT_TRUE(created.ok()) << created.status();
}

TEST_F(QueueHostileInputTest, DelaysAndAlarmAgesHaveACeiling) {
  NewJob far = JobFor("x");
  far.delay = kMaxDelay + absl::Seconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(Enqueue("q", {far}).status()));
  NewJob later = JobFor("x");
  later.not_before = clock_.Now() + kMaxDelay + absl::Seconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(Enqueue("q", {later}).status()));
  QueueConfigPatch ages;
  ages.max_ready_age = absl::Seconds(315576000001);
  auto created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("ages", ages, cb); });
  EXPECT_TRUE(absl::IsInvalidArgument(created.status())) << created.status();
  EXPECT_EQ(Stats().ready + Stats().delayed, 0) << "refused enqueues add nothing";
}

}  // namespace
}  // namespace conduit::work_queue
