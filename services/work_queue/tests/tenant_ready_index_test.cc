#include "services/work_queue/domain/tenant_ready_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

TenantReadyIndex::Entry Ready(uint64_t id, int32_t priority = 0, int64_t ready_s = 0) {
  return TenantReadyIndex::Entry{id, priority, kT0 + absl::Seconds(ready_s)};
}

// Takes jobs until none may be taken; each taken job is leased (AddLeased) when `lease`.
std::vector<uint64_t> Drain(TenantReadyIndex& index, const QueueConfig& config,
                            bool lease = false) {
  std::vector<uint64_t> out;
  while (auto next = index.TakeNext(config)) {
    out.push_back(next->second.id);
    if (lease) index.AddLeased(next->first);
  }
  return out;
}

std::optional<uint64_t> TakeId(TenantReadyIndex& index, const QueueConfig& config) {
  auto next = index.TakeNext(config);
  if (!next) return std::nullopt;
  return next->second.id;
}

std::map<std::string, int64_t> ReadyPerTenant(const TenantReadyIndex& index) {
  std::map<std::string, int64_t> out;
  index.ForEachTenant([&](const std::string& tenant, int64_t ready) { out[tenant] = ready; });
  return out;
}

TEST(TenantReadyIndex, WithinATenantHigherPriorityThenEarlierReadyThenLowerId) {
  TenantReadyIndex index;
  index.AddReady("t", Ready(1, 0, 5));
  index.AddReady("t", Ready(2, 9, 7));
  index.AddReady("t", Ready(3, 0, 1));
  index.AddReady("t", Ready(4, 0, 1));
  index.AddReady("t", Ready(5, INT32_MIN, 0));
  index.AddReady("t", Ready(6, INT32_MAX, 9));
  EXPECT_EQ(index.size(), 6);
  EXPECT_TRUE(index.Check().ok()) << index.Check();
  EXPECT_EQ(Drain(index, {}), (std::vector<uint64_t>{6, 2, 3, 4, 1, 5}));
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.OldestReady(), std::nullopt);
  EXPECT_TRUE(ReadyPerTenant(index).empty());
  EXPECT_TRUE(index.Check().ok()) << index.Check();
}

TEST(TenantReadyIndex, TakeNextGivesBackTheEntryAndItsTenant) {
  TenantReadyIndex index;
  const absl::Time ready_at = kT0 + absl::Microseconds(1'234'567);
  index.AddReady("acme", TenantReadyIndex::Entry{42, -3, ready_at});
  auto next = index.TakeNext(QueueConfig{});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "acme");
  EXPECT_EQ(next->second.id, 42u);
  EXPECT_EQ(next->second.priority, -3);
  EXPECT_EQ(next->second.ready_at, ready_at);
  EXPECT_EQ(index.TakeNext(QueueConfig{}), std::nullopt);
}

TEST(TenantReadyIndex, TenantsTakeTurnsOfTheirWeight) {
  TenantReadyIndex index;
  QueueConfig config;
  config.tenant_weights = {{"big", 2}};
  for (uint64_t id = 1; id <= 5; ++id) index.AddReady("big", Ready(id));
  for (uint64_t id = 11; id <= 13; ++id) index.AddReady("small", Ready(id));
  EXPECT_EQ(ReadyPerTenant(index), (std::map<std::string, int64_t>{{"big", 5}, {"small", 3}}));
  EXPECT_EQ(Drain(index, config), (std::vector<uint64_t>{1, 2, 11, 3, 4, 12, 5, 13}));
  EXPECT_TRUE(index.Check().ok()) << index.Check();
}

TEST(TenantReadyIndex, ATenantAtItsInFlightLimitIsPassedOverUntilALeaseEnds) {
  TenantReadyIndex index;
  QueueConfig config;
  config.max_in_flight_per_tenant = 1;
  index.AddReady("a", Ready(1));
  index.AddReady("a", Ready(2));
  index.AddReady("b", Ready(3));
  index.AddReady("b", Ready(4));
  EXPECT_EQ(Drain(index, config, /*lease=*/true), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(index.size(), 2) << "passed over, not dropped";
  EXPECT_EQ(index.leased().at("a"), 1);
  index.RemoveLeased("a");  // a's lease ended
  EXPECT_FALSE(index.leased().contains("a"));
  EXPECT_EQ(TakeId(index, config), 2u);
  index.AddLeased("a");
  EXPECT_EQ(TakeId(index, config), std::nullopt);  // b is still at its limit
  index.RemoveLeased("b");
  EXPECT_EQ(TakeId(index, config), 4u);
  EXPECT_TRUE(index.Check().ok()) << index.Check();
}

TEST(TenantReadyIndex, AnEmptiedTenantLeavesTheRingAndComesBackAtItsEnd) {
  TenantReadyIndex index;
  index.AddReady("a", Ready(1));
  index.AddReady("b", Ready(2));
  index.AddReady("b", Ready(3));
  EXPECT_EQ(TakeId(index, {}), 1u);
  EXPECT_EQ(ReadyPerTenant(index), (std::map<std::string, int64_t>{{"b", 2}}));
  EXPECT_TRUE(index.Check().ok()) << index.Check();
  index.AddReady("a", Ready(4));  // behind b, which is next
  EXPECT_EQ(Drain(index, {}), (std::vector<uint64_t>{2, 4, 3}));
  EXPECT_TRUE(index.Check().ok()) << index.Check();
  index.RemoveLeased("nobody");  // no count below zero
  EXPECT_TRUE(index.leased().empty());
}

TEST(TenantReadyIndex, OldestReadyFollowsTheEarliestReadyTimeAcrossTenantsAndPriorities) {
  TenantReadyIndex index;
  QueueConfig config;
  config.tenant_weights = {{"a", 2}};
  EXPECT_EQ(index.OldestReady(), std::nullopt);
  index.AddReady("a", Ready(1, 0, 1));  // old and low priority: taken last of a's
  index.AddReady("a", Ready(2, 5, 5));
  index.AddReady("a", Ready(3, 5, 6));
  index.AddReady("b", Ready(4, 1, 4));
  index.AddReady("b", Ready(5, 0, 2));
  const std::vector<std::pair<uint64_t, std::optional<absl::Time>>> want = {
      {2, kT0 + absl::Seconds(1)}, {3, kT0 + absl::Seconds(1)}, {4, kT0 + absl::Seconds(1)},
      {1, kT0 + absl::Seconds(2)},  // b's low-priority job is the oldest now
      {5, std::nullopt},
  };
  EXPECT_EQ(index.OldestReady(), kT0 + absl::Seconds(1));
  for (const auto& [id, oldest] : want) {
    EXPECT_EQ(TakeId(index, config), id);
    EXPECT_EQ(index.OldestReady(), oldest) << "after taking " << id;
    EXPECT_TRUE(index.Check().ok()) << index.Check();
  }
  index.AddReady("b", Ready(6, 3, 8));
  EXPECT_EQ(index.OldestReady(), kT0 + absl::Seconds(8));
  index.AddReady("a", Ready(7, -1, 0));  // an older job in a new bucket
  EXPECT_EQ(index.OldestReady(), kT0);
  index.AddReady("b", Ready(8, 3, 7));  // a new front of an existing bucket
  EXPECT_EQ(index.OldestReady(), kT0);
  EXPECT_EQ(TakeId(index, config), 8u) << "b's turn: its earlier job at priority 3";
  EXPECT_EQ(TakeId(index, config), 7u);
  EXPECT_EQ(index.OldestReady(), kT0 + absl::Seconds(8));
  EXPECT_TRUE(index.Check().ok()) << index.Check();
}

// A reference model of the index: per tenant the ready jobs in lease order, and leased counts.
class Model {
 public:
  // Lease order within a tenant: higher priority, then earlier ready time, then lower id.
  using Key = std::tuple<int64_t, absl::Time, uint64_t>;
  static Key KeyOf(const TenantReadyIndex::Entry& e) {
    return {-static_cast<int64_t>(e.priority), e.ready_at, e.id};
  }

  void AddReady(const std::string& tenant, const TenantReadyIndex::Entry& e) {
    ready_[tenant].emplace(KeyOf(e), e);
  }
  void AddLeased(const std::string& tenant) { ++leased_[tenant]; }
  void RemoveLeased(const std::string& tenant) {
    auto it = leased_.find(tenant);
    if (it != leased_.end() && --it->second == 0) leased_.erase(it);
  }
  bool AtLimit(const std::string& tenant, const QueueConfig& config) const {
    auto it = leased_.find(tenant);
    return config.max_in_flight_per_tenant > 0 && it != leased_.end() &&
           it->second >= config.max_in_flight_per_tenant;
  }
  // Whether some tenant with ready jobs may take one.
  bool AnyMayTake(const QueueConfig& config) const {
    for (const auto& [tenant, jobs] : ready_) {
      if (!AtLimit(tenant, config)) return true;
    }
    return false;
  }
  // The next job of `tenant` in lease order, taken out; nullopt when it has none.
  std::optional<TenantReadyIndex::Entry> Take(const std::string& tenant) {
    auto it = ready_.find(tenant);
    if (it == ready_.end()) return std::nullopt;
    TenantReadyIndex::Entry e = it->second.begin()->second;
    it->second.erase(it->second.begin());
    if (it->second.empty()) ready_.erase(it);
    return e;
  }

  int64_t size() const {
    int64_t n = 0;
    for (const auto& [tenant, jobs] : ready_) n += static_cast<int64_t>(jobs.size());
    return n;
  }
  std::optional<absl::Time> OldestReady() const {
    std::optional<absl::Time> oldest;
    for (const auto& [tenant, jobs] : ready_) {
      for (const auto& [key, e] : jobs) {
        if (!oldest || e.ready_at < *oldest) oldest = e.ready_at;
      }
    }
    return oldest;
  }
  std::map<std::string, int64_t> ReadyPerTenant() const {
    std::map<std::string, int64_t> out;
    for (const auto& [tenant, jobs] : ready_) out[tenant] = static_cast<int64_t>(jobs.size());
    return out;
  }
  std::map<std::string, int32_t> leased() const { return leased_; }

 private:
  std::map<std::string, std::map<Key, TenantReadyIndex::Entry>> ready_;
  std::map<std::string, int32_t> leased_;
};

// Random AddReady / TakeNext / AddLeased / RemoveLeased against the model: after every step
// the invariants hold and the index agrees with the model; every taken job is the next of its
// tenant, from a tenant below its in-flight limit, and nothing is taken only when no tenant may.
void RunRandomOperations(uint64_t seed, int tenant_count, const QueueConfig& config) {
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", " << tenant_count << " tenants");
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto random_tenant = [&] { return "t" + std::to_string(uniform(0, tenant_count - 1)); };
  TenantReadyIndex index;
  Model model;
  std::vector<uint64_t> taken;
  int held_back = 0;  // takes refused while jobs were ready: every tenant at its limit
  uint64_t next_id = 1;
  for (int step = 0; step < 3000; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    const int64_t op = uniform(0, 99);
    if (op < 40) {
      const std::string tenant = random_tenant();
      // Few distinct priorities and ready times, so that ties are common; ids break them.
      TenantReadyIndex::Entry e{next_id++, static_cast<int32_t>(uniform(-2, 2)),
                                kT0 + absl::Microseconds(uniform(0, 50))};
      if (uniform(0, 19) == 0) e.priority = uniform(0, 1) == 0 ? INT32_MIN : INT32_MAX;
      index.AddReady(tenant, e);
      model.AddReady(tenant, e);
    } else if (op < 80) {
      auto next = index.TakeNext(config);
      if (!next) {
        ASSERT_FALSE(model.AnyMayTake(config)) << "nothing taken while a tenant may take";
        if (model.size() > 0) ++held_back;
      } else {
        const auto& [tenant, entry] = *next;
        ASSERT_FALSE(model.AtLimit(tenant, config)) << tenant << " is at its in-flight limit";
        std::optional<TenantReadyIndex::Entry> want = model.Take(tenant);
        ASSERT_TRUE(want.has_value()) << tenant << " has no ready job";
        EXPECT_EQ(entry.id, want->id);
        EXPECT_EQ(entry.priority, want->priority);
        EXPECT_EQ(entry.ready_at, want->ready_at);
        taken.push_back(entry.id);
        if (uniform(0, 1)) {  // leased, as the queue does with a taken job
          index.AddLeased(tenant);
          model.AddLeased(tenant);
        }
      }
    } else if (op < 88) {
      const std::string tenant = random_tenant();
      index.AddLeased(tenant);
      model.AddLeased(tenant);
    } else {
      const std::string tenant = random_tenant();
      index.RemoveLeased(tenant);
      model.RemoveLeased(tenant);
    }
    ASSERT_TRUE(index.Check().ok()) << index.Check();
    ASSERT_EQ(index.size(), model.size());
    ASSERT_EQ(index.OldestReady(), model.OldestReady());
    ASSERT_EQ(ReadyPerTenant(index), model.ReadyPerTenant());
    const std::map<std::string, int32_t> leased(index.leased().begin(), index.leased().end());
    ASSERT_EQ(leased, model.leased());
  }
  EXPECT_GT(taken.size(), 150u) << "the sequence exercised TakeNext";
  if (config.max_in_flight_per_tenant > 0) {
    EXPECT_GT(held_back, 0) << "the sequence reached the in-flight limit";
  }
  if (tenant_count == 1 && config.max_in_flight_per_tenant == 0) {
    // One tenant and no limit: each take is the least key of all that are ready, so jobs
    // added before the first take come out as a plain sort of their keys.
    TenantReadyIndex fresh;
    std::vector<std::pair<Model::Key, uint64_t>> sorted;
    for (uint64_t id = 1; id <= 200; ++id) {
      TenantReadyIndex::Entry e{id, static_cast<int32_t>(uniform(-2, 2)),
                                kT0 + absl::Microseconds(uniform(0, 20))};
      fresh.AddReady("t0", e);
      sorted.emplace_back(Model::KeyOf(e), id);
    }
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> want;
    for (const auto& [key, id] : sorted) want.push_back(id);
    EXPECT_EQ(Drain(fresh, config), want);
  }
}

TEST(TenantReadyIndex, OneTenantTakesInKeyOrderAfterRandomOperations) {
  for (uint64_t seed : {1, 2, 3}) RunRandomOperations(seed, 1, QueueConfig{});
}

TEST(TenantReadyIndex, InvariantsAndPerTenantOrderHoldAfterRandomOperations) {
  QueueConfig config;
  config.tenant_weights = {{"t0", 3}, {"t2", 2}};
  for (uint64_t seed : {4, 5, 6}) RunRandomOperations(seed, 4, config);
  config.max_in_flight_per_tenant = 2;
  for (uint64_t seed : {7, 8, 9}) RunRandomOperations(seed, 4, config);
  QueueConfig one_limited;
  one_limited.max_in_flight_per_tenant = 3;
  RunRandomOperations(10, 1, one_limited);
}

}  // namespace
}  // namespace conduit::work_queue
