// The C++ client library against a real cluster (etcd, three conduit-broker, a
// conduit-coordinator pointed at one broker): everything routes by the cluster's metadata.
// And the coordinator's lag stays fresh when the broker it asks first dies.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "client/group_consumer.h"
#include "client/producer.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/support/coordinator_client.h"

namespace conduit::testing {
namespace {

std::string CoordinatorBinary() {
  const char* dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/conduit-coordinator";
}

// A Producer bootstrapped with one broker's address reaches every partition's leader, and a
// group consumer reads everything back, in order per key.
TEST_F(ClusterTest, ProducerAndGroupConsumerRouteByMetadata) {
  StartBrokers(3);
  ASSERT_TRUE(CreateTopic(client(2), "orders", 12).ok());
  ASSERT_TRUE(AwaitApplied("orders", 12));
  ASSERT_TRUE(Eventually([&] { return Partitions(1, "orders").size() == 12; }));
  std::filesystem::create_directories(dir_.Sub("coordinator"));
  ServerProcess coordinator(CoordinatorBinary(), dir_.Sub("coordinator/data"),
                            dir_.Sub("coordinator"), {"--broker-address", address(3)});
  ASSERT_TRUE(coordinator.running());

  client::ProducerOptions popts;
  popts.address = address(1);  // one broker; the others come from its metadata
  popts.topic = "orders";
  auto producer = client::Producer::Create(popts);
  ASSERT_TRUE(producer.ok()) << producer.status();
  std::map<std::string, std::vector<std::string>> sent;
  std::set<int32_t> partitions;
  std::vector<std::future<absl::StatusOr<client::RecordPosition>>> acks;
  for (int i = 0; i < 600; ++i) {
    const std::string key = absl::StrCat("product-", i % 120);
    const std::string value = absl::StrCat("v", i);
    sent[key].push_back(value);
    acks.push_back((*producer)->Send(client::ProducerRecord{.key = key, .value = value}));
  }
  ASSERT_TRUE((*producer)->Flush().ok());
  for (auto& ack : acks) {
    auto position = ack.get();
    ASSERT_TRUE(position.ok()) << position.status();
    partitions.insert(position->partition);
  }
  EXPECT_EQ(partitions.size(), 12u) << "120 keys over 12 partitions reach every leader";

  client::ConsumerOptions copts;
  copts.address = address(2);
  copts.coordinator_address = coordinator.address();
  copts.group = "search";
  copts.topics = {"orders"};
  auto consumer = client::GroupConsumer::Create(copts);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::map<std::string, std::vector<std::string>> read;
  size_t total = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (total < 600 && absl::Now() < deadline) {
    auto n = (*consumer)->ProcessAndCommit(absl::Milliseconds(500), [&](const auto& r) {
      read[*r.key].push_back(*r.value);
      ++total;
      return absl::OkStatus();
    });
    ASSERT_TRUE(n.ok()) << n.status();
  }
  EXPECT_EQ(total, 600u);
  EXPECT_EQ(read, sent) << "every record, in order per key";
}

// The lag of a group whose commits stay at 0: the sum over the partitions of `topic`, or -1 when
// the coordinator could not ask a broker (its broker_error) or did not answer.
int64_t TotalLag(CoordinatorClient& coordinator, const std::string& group) {
  cpb::DescribeGroupResponse described;
  if (!coordinator.Describe(group, &described).ok() || !described.broker_error().empty()) {
    return -1;
  }
  int64_t total = 0;
  for (const auto& p : described.partitions()) total += p.lag_records();
  return total;
}

// --broker-address as a list: when the first broker is SIGKILLed the coordinator asks the next,
// so lag keeps counting new records. Negative control: a coordinator given only that broker
// cannot describe the group's lag any more.
TEST_F(ClusterTest, CoordinatorLagOutlivesTheFirstBrokerInItsList) {
  StartBrokers(3);
  constexpr int kPartitions = 3;
  ASSERT_TRUE(CreateTopic(client(2), "lagged", kPartitions, /*replication_factor=*/3).ok());
  ASSERT_TRUE(AwaitApplied("lagged", kPartitions));
  auto start_coordinator = [&](const std::string& name, const std::string& brokers) {
    std::filesystem::create_directories(dir_.Sub(name));
    return std::make_unique<ServerProcess>(CoordinatorBinary(), dir_.Sub(name + "/data"),
                                           dir_.Sub(name),
                                           std::vector<std::string>{"--broker-address", brokers});
  };
  auto listed =
      start_coordinator("listed", absl::StrCat(address(1), ",", address(2), ",", address(3)));
  auto single = start_coordinator("single", address(1));
  ASSERT_TRUE(listed->running() && single->running());
  CoordinatorClient via_list(listed->address()), via_one(single->address());

  // Ten records per partition, each at its leader; the group has committed 0 everywhere.
  auto produce_ten_each = [&] {
    for (int32_t p = 0; p < kPartitions; ++p) {
      for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(Eventually([&] {
          const auto partitions = Partitions(2, "lagged");
          const int32_t leader = partitions.size() == kPartitions ? partitions[p].leader() : -1;
          return leader > 0 && brokers_.at(leader)->running() &&
                 ProduceOne(leader, "lagged", p, absl::StrCat("v", i)).ok();
        })) << "partition "
            << p;
      }
    }
  };
  produce_ten_each();
  for (CoordinatorClient* c : {&via_list, &via_one}) {
    for (int32_t p = 0; p < kPartitions; ++p)
      ASSERT_TRUE(c->Commit("g", "", -1, "lagged", p, 0).ok());
  }
  ASSERT_TRUE(Eventually([&] { return TotalLag(via_list, "g") == 30; }));
  ASSERT_TRUE(Eventually([&] { return TotalLag(via_one, "g") == 30; }));

  broker(1).Kill(SIGKILL);
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : Partitions(2, "lagged")) {
          if (p.leader() <= 1) return false;
        }
        return true;
      },
      absl::Seconds(30)))
      << "the partitions broker 1 led move to the others";
  produce_ten_each();
  // At least 60: a produce retried across the leader change may have landed twice.
  EXPECT_TRUE(Eventually([&] { return TotalLag(via_list, "g") >= 60; }, absl::Seconds(20)))
      << "lag through the list: " << TotalLag(via_list, "g");
  EXPECT_EQ(TotalLag(via_one, "g"), -1) << "the single-broker coordinator cannot ask anyone";
}

}  // namespace
}  // namespace conduit::testing
