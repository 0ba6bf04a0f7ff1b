#include "services/work_queue/domain/tenant_ready_index.h"

#include <vector>

#include <gtest/gtest.h>

namespace conduit::work_queue {
namespace {

Job ReadyJob(uint64_t id, const std::string& tenant, int32_t priority = 0, int64_t ready_s = 0) {
  Job job;
  job.id = id;
  job.tenant = tenant;
  job.priority = priority;
  job.ready_at = absl::FromUnixSeconds(ready_s);
  return job;
}

// Takes jobs until none may be taken; each taken job is leased (AddLeased) when `lease`.
std::vector<uint64_t> Drain(TenantReadyIndex& index, const QueueConfig& config,
                            const std::map<uint64_t, std::string>& tenants, bool lease = false) {
  std::vector<uint64_t> out;
  while (auto id = index.TakeNext(config)) {
    out.push_back(*id);
    if (lease) index.AddLeased(tenants.at(*id));
  }
  return out;
}

TEST(TenantReadyIndex, WithinATenantHigherPriorityThenEarlierReadyThenLowerId) {
  TenantReadyIndex index;
  index.AddReady(ReadyJob(1, "t", 0, 5));
  index.AddReady(ReadyJob(2, "t", 9, 7));
  index.AddReady(ReadyJob(3, "t", 0, 1));
  index.AddReady(ReadyJob(4, "t", 0, 1));
  index.AddReady(ReadyJob(5, "t", INT32_MIN, 0));  // negated without overflow
  EXPECT_EQ(Drain(index, {}, {}), (std::vector<uint64_t>{2, 3, 4, 1, 5}));
  EXPECT_TRUE(index.ready().empty());
}

TEST(TenantReadyIndex, TenantsTakeTurnsOfTheirWeight) {
  TenantReadyIndex index;
  QueueConfig config;
  config.tenant_weights = {{"big", 2}};
  for (uint64_t id = 1; id <= 5; ++id) index.AddReady(ReadyJob(id, "big"));
  for (uint64_t id = 11; id <= 13; ++id) index.AddReady(ReadyJob(id, "small"));
  EXPECT_EQ(Drain(index, config, {}), (std::vector<uint64_t>{1, 2, 11, 3, 4, 12, 5, 13}));
}

TEST(TenantReadyIndex, ATenantAtItsInFlightLimitIsPassedOverUntilALeaseEnds) {
  TenantReadyIndex index;
  QueueConfig config;
  config.max_in_flight_per_tenant = 1;
  std::map<uint64_t, std::string> tenants = {{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}};
  for (const auto& [id, tenant] : tenants) index.AddReady(ReadyJob(id, tenant));
  EXPECT_EQ(Drain(index, config, tenants, /*lease=*/true), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(index.leased().at("a"), 1);
  index.RemoveLeased("a");  // a's lease ended
  EXPECT_FALSE(index.leased().contains("a"));
  EXPECT_EQ(index.TakeNext(config), 2u);
  EXPECT_EQ(index.TakeNext(config), std::nullopt);  // b is still at its limit
  index.RemoveLeased("b");
  EXPECT_EQ(index.TakeNext(config), 4u);
}

TEST(TenantReadyIndex, ARemovedJobIsNotTakenAndAnEmptiedTenantLeavesTheRing) {
  TenantReadyIndex index;
  index.AddReady(ReadyJob(1, "a"));
  index.AddReady(ReadyJob(2, "b"));
  index.AddReady(ReadyJob(3, "b"));
  index.RemoveReady(ReadyJob(1, "a"));
  index.RemoveReady(ReadyJob(3, "b"));
  EXPECT_EQ(Drain(index, {}, {}), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(index.ready().empty());
  index.RemoveLeased("nobody");  // no count below zero
  EXPECT_TRUE(index.leased().empty());
}

}  // namespace
}  // namespace conduit::work_queue
