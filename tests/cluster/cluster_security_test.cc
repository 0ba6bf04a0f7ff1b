// Stored ACLs in a cluster (stored durably, in etcd): an entry
// created through one broker decides calls on another within a watch round trip, a deletion
// too, and a broker started later (or restarted) reads them from etcd.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>

#include "common/security/tokens.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/security/v1/security.grpc.pb.h"
#include "tests/cluster/cluster_fixture.h"

namespace conduit::testing {
namespace {

namespace spb = ::conduit::security::v1;
namespace lpb = ::conduit::log::v1;

class ClusterSecurityTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    std::ofstream(dir_.Sub("tokens")) << security::Sha256Hex("root-token") << " User:root\n"
                                      << security::Sha256Hex("bob-token") << " User:bob\n"
                                      << security::Sha256Hex("peer-token") << " User:peer\n";
    std::ofstream(dir_.Sub("acls")) << "# stored ACLs only\n";
    std::ofstream(dir_.Sub("peer-token")) << "peer-token\n";
  }
  bool StartSecureBroker(int32_t id) {
    return StartBroker(
        id, {"--auth-token-file", dir_.Sub("tokens"), "--acl-file", dir_.Sub("acls"),
             "--superusers", "User:root,User:peer", "--peer-token-file", dir_.Sub("peer-token")});
  }
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return ctx;
  }
  std::unique_ptr<spb::Security::Stub> Security(int32_t id) {
    return spb::Security::NewStub(
        grpc::CreateChannel(address(id), grpc::InsecureChannelCredentials()));
  }
  // The topics broker `id` shows bob (those he may Describe).
  std::vector<std::string> BobsTopics(int32_t id) { return Topics(id, "bob-token"); }
  std::vector<std::string> Topics(int32_t id, const std::string& token) {
    auto stub = lpb::LogService::NewStub(
        grpc::CreateChannel(address(id), grpc::InsecureChannelCredentials()));
    lpb::ListTopicsResponse resp;
    std::vector<std::string> names;
    if (!stub->ListTopics(As(token).get(), {}, &resp).ok()) return {"<error>"};
    for (const auto& t : resp.topics()) names.push_back(t.name());
    return names;
  }
};

TEST_F(ClusterSecurityTest, AclsStoredThroughOneBrokerDecideOnEveryBroker) {
  ASSERT_TRUE(StartSecureBroker(1));
  ASSERT_TRUE(StartSecureBroker(2));
  {
    auto stub = lpb::LogService::NewStub(
        grpc::CreateChannel(address(1), grpc::InsecureChannelCredentials()));
    lpb::CreateTopicRequest req;
    req.set_name("orders.eu");
    req.set_partitions(1);
    req.set_replication_factor(1);
    lpb::CreateTopicResponse resp;
    const grpc::Status s = stub->CreateTopic(As("root-token").get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_TRUE(Eventually([&] { return Topics(2, "root-token").size() == 1; }));
  EXPECT_TRUE(BobsTopics(2).empty());

  spb::CreateAclsRequest create;
  spb::AclEntry* e = create.add_entries();
  e->set_principal("User:bob");
  e->set_resource_type(spb::RESOURCE_TYPE_TOPIC);
  e->set_pattern_type(spb::PATTERN_TYPE_PREFIXED);
  e->set_resource_name("orders.");
  e->set_operation(spb::OPERATION_READ);
  e->set_permission(spb::PERMISSION_ALLOW);
  spb::CreateAclsResponse created;
  const grpc::Status s = Security(1)->CreateAcls(As("root-token").get(), create, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Broker 2 takes it in through its watch on etcd.
  EXPECT_TRUE(Eventually([&] { return BobsTopics(2) == std::vector<std::string>{"orders.eu"}; },
                         absl::Seconds(5)));

  // A broker started after the change reads it at startup.
  // (Once its view of the cluster has the topic: that view lags a new broker's start.)
  ASSERT_TRUE(StartSecureBroker(3));
  ASSERT_TRUE(Eventually([&] { return Topics(3, "root-token").size() == 1; }));
  EXPECT_EQ(BobsTopics(3), std::vector<std::string>{"orders.eu"});
  spb::ListAclsResponse listed;
  ASSERT_TRUE(Security(3)->ListAcls(As("root-token").get(), {}, &listed).ok());
  ASSERT_EQ(listed.acls_size(), 1);
  EXPECT_EQ(listed.acls(0).source(), spb::ACL_SOURCE_STORED);

  // Deleted through broker 2: gone on 1 and 3.
  spb::DeleteAclsRequest del;
  del.add_filters()->set_principal("User:bob");
  spb::DeleteAclsResponse deleted;
  ASSERT_TRUE(Security(2)->DeleteAcls(As("root-token").get(), del, &deleted).ok());
  EXPECT_EQ(deleted.deleted_size(), 1);
  EXPECT_TRUE(
      Eventually([&] { return BobsTopics(1).empty() && BobsTopics(3).empty(); }, absl::Seconds(5)));
}

}  // namespace
}  // namespace conduit::testing
