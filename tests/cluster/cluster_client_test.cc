// The C++ client library against a real cluster (etcd, three conduit-broker, a
// conduit-coordinator pointed at one broker): everything routes by the cluster's metadata.

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/group_consumer.h"
#include "client/producer.h"
#include "tests/cluster/cluster_fixture.h"

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

}  // namespace
}  // namespace conduit::testing
