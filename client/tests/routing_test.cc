// Routing by metadata against a real single node (the fixture's server): a single node is a
// cluster of one, broker 0 leading every partition, and a client whose bootstrap list starts
// with a dead address finds it.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/cluster_router.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/tests/client_fixture.h"

namespace conduit::client {
namespace {

namespace logpb = ::conduit::log::v1;

constexpr char kDead[] = "127.0.0.1:1";  // nothing listens on port 1

TEST_F(ClientTest, RouterUsesTheFirstBootstrapThatAnswersAndBrokerZeroLeadsEveryPartition) {
  ASSERT_TRUE(log_->CreateTopic("routed", 3).ok());
  auto router = ClusterRouter::Create({.bootstrap = {kDead, address()}});
  ASSERT_TRUE(router.ok()) << router.status();
  EXPECT_EQ((*router)->answered_address(), address());
  EXPECT_EQ(*(*router)->PartitionCount("routed"), 3);
  for (int32_t p = 0; p < 3; ++p) {
    absl::StatusOr<ClusterRouter::Route> route = (*router)->Leader("routed", p);
    ASSERT_TRUE(route.ok()) << route.status();
    EXPECT_EQ(route->leader, 0);
    EXPECT_EQ(route->epoch, 0);
  }
  EXPECT_TRUE(absl::IsNotFound((*router)->Leader("routed", 3).status()));
  EXPECT_TRUE(absl::IsNotFound((*router)->PartitionCount("missing").status()));
  ASSERT_TRUE(log_->CreateTopic("later", 2).ok());  // unknown to the router until looked up
  EXPECT_EQ(*(*router)->PartitionCount("later"), 2);
}

TEST_F(ClientTest, NoBootstrapAnsweringIsUnavailableAndNamesTheAddressesTried) {
  auto router = ClusterRouter::Create({.bootstrap = {kDead, "127.0.0.1:2"}});
  ASSERT_TRUE(absl::IsUnavailable(router.status())) << router.status();
  EXPECT_NE(router.status().message().find("127.0.0.1:2"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterRouter::Create({}).status()));
}

TEST_F(ClientTest, ProducerWithADeadFirstBootstrapAddressProduces) {
  ASSERT_TRUE(log_->CreateTopic("boot", 2).ok());
  auto producer = Producer::Create({.bootstrap = {kDead, address()}, .topic = "boot"});
  ASSERT_TRUE(producer.ok()) << producer.status();
  std::vector<std::future<absl::StatusOr<RecordPosition>>> results;
  for (int i = 0; i < 20; ++i) {
    results.push_back(
        (*producer)->Send(ProducerRecord{.value = std::to_string(i), .partition = i % 2}));
  }
  ASSERT_TRUE((*producer)->Flush().ok());
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<RecordPosition> p = results[i].get();
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->offset, i / 2);
  }
  logpb::FetchResponse fetched;
  ASSERT_TRUE(log_->Fetch("boot", 1, 0, &fetched).ok());
  ASSERT_EQ(fetched.records_size(), 10);
  EXPECT_EQ(fetched.records(9).value(), "19");
}

// The coordinator is not named: it defaults to the bootstrap broker that answered.
TEST_F(ClientTest, GroupConsumerWithADeadFirstBootstrapAddressConsumes) {
  ASSERT_TRUE(log_->CreateTopic("boot-read", 2).ok());
  {
    auto producer = Producer::Create({.address = address(), .topic = "boot-read"});
    ASSERT_TRUE(producer.ok()) << producer.status();
    for (int i = 0; i < 20; ++i) {
      (*producer)->Send(ProducerRecord{.value = std::to_string(i), .partition = i % 2},
                        [](auto) {});
    }
    ASSERT_TRUE((*producer)->Flush().ok());
  }
  auto consumer = GroupConsumer::Create(
      {.bootstrap = {kDead, address()}, .group = "boot-group", .topics = {"boot-read"}});
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::map<int32_t, std::vector<std::string>> got;
  int total = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (total < 20 && absl::Now() < give_up) {
    auto records = (*consumer)->Poll(absl::Milliseconds(200));
    ASSERT_TRUE(records.ok()) << records.status();
    for (const ConsumedRecord& r : *records) got[r.partition].push_back(*r.value), ++total;
  }
  EXPECT_EQ(got[0],
            (std::vector<std::string>{"0", "2", "4", "6", "8", "10", "12", "14", "16", "18"}));
  EXPECT_EQ(got[1].size(), 10u);
  EXPECT_TRUE((*consumer)->Commit().ok()) << "commits reach the coordinator";
}

// An address advertised with a wildcard host (a server listening on 0.0.0.0) is dialled on the
// host the metadata came from; other addresses are kept.
TEST(ResolveAdvertisedTest, WildcardHostsAreTheHostTheMetadataCameFrom) {
  EXPECT_EQ(ResolveAdvertised("0.0.0.0:7070", "broker-1.example:7070"), "broker-1.example:7070");
  EXPECT_EQ(ResolveAdvertised("[::]:7071", "10.1.2.3:7070"), "10.1.2.3:7071");
  EXPECT_EQ(ResolveAdvertised("", "10.1.2.3:7070"), "10.1.2.3:7070");
  EXPECT_EQ(ResolveAdvertised("broker-2.example:7070", "10.1.2.3:7070"), "broker-2.example:7070");
  EXPECT_EQ(BootstrapList("a:1", {"b:2", "", "c:3"}),
            (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  // A comma-separated list (a server's --bridge-bootstrap, the CLI's --addr) is split.
  EXPECT_EQ(BootstrapList("a:1, b:2,", {"c:3,d:4"}),
            (std::vector<std::string>{"a:1", "b:2", "c:3", "d:4"}));
}

}  // namespace
}  // namespace conduit::client
