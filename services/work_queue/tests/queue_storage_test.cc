#include <gtest/gtest.h>

#include "services/work_queue/storage/codec.h"

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

  QueueMeta q{3, "emails", QueueConfig{}, absl::FromUnixSeconds(9)};
  q.config.backoff_multiplier = 1.5;
  q.config.max_depth = 100;
  q.config.max_ready_age = absl::Seconds(30);
  q.config.tenant_weights = {{"gold", 3}, {"silver", 1}};
  q.config.max_in_flight_per_tenant = 8;
  EXPECT_EQ(*codec::DecodeQueue(codec::EncodeQueue(q)), q);
}

}  // namespace
}  // namespace conduit::work_queue
