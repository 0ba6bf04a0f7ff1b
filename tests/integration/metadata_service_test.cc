// GetMetadata over real gRPC on 127.0.0.1: a single node as a cluster of one.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/integration/log_server_fixture.h"

namespace conduit::testing {
namespace {

// A single node is a cluster of one: broker 0 at its own address, leader of every partition.
// Records and partitions carry the leader epoch (0 here).
TEST_F(LogServerTest, GetMetadataOnASingleNodeNamesItselfLeaderOfEveryPartition) {
  ASSERT_TRUE(client().CreateTopic("orders", 3).ok());
  ASSERT_TRUE(client().CreateTopic("audit", 1).ok());
  logpb::GetMetadataRequest request;
  logpb::GetMetadataResponse response;
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    ASSERT_TRUE(client().stub()->GetMetadata(&ctx, request, &response).ok());
  }
  ASSERT_EQ(response.brokers_size(), 1);
  EXPECT_EQ(response.brokers(0).id(), 0);
  EXPECT_EQ(response.brokers(0).address(), address());
  EXPECT_EQ(response.controller_id(), 0);
  ASSERT_EQ(response.topics_size(), 2);
  const auto& orders = response.topics(1);
  EXPECT_EQ(orders.name(), "orders");
  ASSERT_EQ(orders.partitions_size(), 3);
  for (const auto& p : orders.partitions()) {
    EXPECT_EQ(p.leader(), 0);
    EXPECT_EQ(p.leader_epoch(), 0);
    EXPECT_THAT(p.replicas(), ::testing::ElementsAre(0));
    EXPECT_THAT(p.isr(), ::testing::ElementsAre(0));
  }
  request.add_topics("nope");
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  EXPECT_EQ(client().stub()->GetMetadata(&ctx, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace conduit::testing
