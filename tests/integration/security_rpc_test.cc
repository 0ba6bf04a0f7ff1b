// The security service on a real conduit-standalone: ACLs created,
// listed and deleted by RPC apply to the next call and survive a restart; only a caller allowed
// to Alter the cluster may change them; the audit trail records admin calls and refusals (who,
// from where, what, which resource, the outcome, the service's own audit record) and never
// shows its notes to the client.

#include <signal.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/log/v1/replica.pb.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "conduit/security/v1/security.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

namespace lpb = ::conduit::log::v1;
namespace spb = ::conduit::security::v1;
namespace qpb = ::conduit::queue::v1;
namespace cpb = ::conduit::coordinator::v1;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

spb::AclEntry Acl(const std::string& principal, spb::ResourceType type, spb::PatternType pattern,
                  const std::string& name, spb::Operation op,
                  spb::Permission permission = spb::PERMISSION_ALLOW) {
  spb::AclEntry e;
  e.set_principal(principal);
  e.set_resource_type(type);
  e.set_pattern_type(pattern);
  e.set_resource_name(name);
  e.set_operation(op);
  e.set_permission(permission);
  return e;
}

class SecurityRpcTest : public AuthTest {
 protected:
  // The coordinator asks the broker (the same process) as User:svc, with the Describe it needs.
  void Start(const std::string& acls = "") {
    Write("peer-token", "svc-token\n");
    ASSERT_NO_FATAL_FAILURE(StartServer("allow User:svc topic any * Describe\n" + acls,
                                        "conduit-standalone",
                                        {"--peer-token-file", dir_.Sub("peer-token")}));
    security_ = spb::Security::NewStub(channel_);
    log_ = lpb::LogService::NewStub(channel_);
  }
  // A crash and a restart on the same data dir: SIGKILL, so only what reached RocksDB (the
  // synced ACL writes, the audit records in the WAL) can be there afterwards.
  void Restart() {
    const int status = server_->Kill(SIGKILL);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    server_.reset();
    server_ = std::make_unique<ServerProcess>(
        AuthBinary("conduit-standalone"), dir_.Sub("data"), dir_.path(),
        std::vector<std::string>{"--auth-token-file", dir_.Sub("tokens"), "--acl-file",
                                 dir_.Sub("acls"), "--superusers", "User:root", "--peer-token-file",
                                 dir_.Sub("peer-token")});
    ASSERT_TRUE(server_->running());
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    security_ = spb::Security::NewStub(channel_);
    log_ = lpb::LogService::NewStub(channel_);
  }
  grpc::Status CreateAcls(const std::string& token, std::vector<spb::AclEntry> entries,
                          spb::CreateAclsResponse* out = nullptr) {
    spb::CreateAclsRequest req;
    for (auto& e : entries) *req.add_entries() = e;
    spb::CreateAclsResponse local;
    return security_->CreateAcls(As(token).get(), req, out ? out : &local);
  }
  grpc::Status CreateTopic(const std::string& token, const std::string& name,
                           grpc::ClientContext* ctx = nullptr) {
    lpb::CreateTopicRequest req;
    req.set_name(name);
    req.set_partitions(1);
    lpb::CreateTopicResponse resp;
    auto own = As(token);
    return log_->CreateTopic(ctx ? ctx : own.get(), req, &resp);
  }
  grpc::Status Produce(const std::string& token, const std::string& topic) {
    lpb::ProduceRequest req;
    req.set_topic(topic);
    req.add_records()->set_value("v");
    lpb::ProduceResponse resp;
    return log_->Produce(As(token).get(), req, &resp);
  }
  std::vector<spb::AuditEntry> Audit(spb::ListAuditRequest req = {}) {
    spb::ListAuditResponse resp;
    const grpc::Status s = security_->ListAudit(As("root-token").get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.entries().begin(), resp.entries().end()};
  }

  std::unique_ptr<spb::Security::Stub> security_;
  std::unique_ptr<lpb::LogService::Stub> log_;
};

TEST_F(SecurityRpcTest, CreatedAclsApplyAtOnceAndSurviveARestart) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(CreateTopic("root-token", "orders.eu").ok());
  ASSERT_TRUE(CreateTopic("root-token", "orders.pii").ok());
  EXPECT_EQ(Produce("bob-token", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  spb::CreateAclsResponse created;
  ASSERT_TRUE(CreateAcls("root-token",
                         {Acl("User:bob", spb::RESOURCE_TYPE_TOPIC, spb::PATTERN_TYPE_PREFIXED,
                              "orders.", spb::OPERATION_WRITE),
                          Acl("User:bob", spb::RESOURCE_TYPE_TOPIC, spb::PATTERN_TYPE_LITERAL,
                              "orders.pii", spb::OPERATION_WRITE, spb::PERMISSION_DENY)},
                         &created)
                  .ok());
  EXPECT_EQ(created.created(), 2u);
  EXPECT_TRUE(Produce("bob-token", "orders.eu").ok());
  EXPECT_EQ(Produce("bob-token", "orders.pii").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_TRUE(Produce("bob-token", "orders.eu").ok());
  EXPECT_EQ(Produce("bob-token", "orders.pii").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  spb::ListAclsRequest stored;
  stored.mutable_filter()->set_principal("User:bob");
  spb::ListAclsResponse listed;
  ASSERT_TRUE(security_->ListAcls(As("root-token").get(), stored, &listed).ok());
  ASSERT_EQ(listed.acls_size(), 2);
  EXPECT_EQ(listed.acls(0).source(), spb::ACL_SOURCE_STORED);
  EXPECT_EQ(listed.acls(0).text(), "allow User:bob topic prefixed orders. Write");

  spb::DeleteAclsRequest del;
  del.add_filters()->set_permission(spb::PERMISSION_ALLOW);
  spb::DeleteAclsResponse deleted;
  ASSERT_TRUE(security_->DeleteAcls(As("root-token").get(), del, &deleted).ok());
  ASSERT_EQ(deleted.deleted_size(), 1);
  EXPECT_EQ(deleted.deleted(0).resource_name(), "orders.");
  EXPECT_EQ(Produce("bob-token", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(SecurityRpcTest, OnlyAnAlterOfTheClusterChangesAcls) {
  ASSERT_NO_FATAL_FAILURE(Start("allow User:alice cluster any * Alter\n"));
  const auto grant =
      Acl("User:bob", spb::RESOURCE_TYPE_TOPIC, spb::PATTERN_TYPE_ANY, "*", spb::OPERATION_WRITE);
  const grpc::Status by_bob = CreateAcls("bob-token", {grant});
  EXPECT_EQ(by_bob.error_code(), grpc::StatusCode::PERMISSION_DENIED) << by_bob.error_message();
  spb::ListAclsResponse listed;
  ASSERT_TRUE(security_->ListAcls(As("alice-token").get(), {}, &listed).ok());  // Alter ⇒ Describe
  ASSERT_EQ(listed.acls_size(), 2);  // the file's entries only: bob stored nothing
  EXPECT_EQ(listed.acls(1).source(), spb::ACL_SOURCE_FILE);
  EXPECT_TRUE(CreateAcls("alice-token", {grant}).ok());

  // A bad entry: INVALID_ARGUMENT naming it, nothing stored.
  auto bad = grant;
  bad.set_operation(spb::OPERATION_UNSPECIFIED);
  const grpc::Status invalid = CreateAcls("alice-token", {grant, bad});
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(invalid.error_message(), HasSubstr("entries[1].operation"));
  listed.Clear();
  ASSERT_TRUE(security_->ListAcls(As("alice-token").get(), {}, &listed).ok());
  EXPECT_EQ(listed.acls_size(), 3);
}

TEST_F(SecurityRpcTest, TheAuditTrailRecordsAdminCallsAndRefusals) {
  ASSERT_NO_FATAL_FAILURE(Start("allow User:alice topic prefixed a. Create,Write\n"));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer alice-token");
  ASSERT_TRUE(CreateTopic("", "a.one", &ctx).ok());
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    EXPECT_THAT(std::string(key.data(), key.size()), Not(HasSubstr("conduit-audit")));
  }
  EXPECT_TRUE(Produce("alice-token", "a.one").ok());  // not an admin call: not audited
  EXPECT_EQ(CreateTopic("bob-token", "a.two").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Produce("no-such-token", "a.one").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  const auto all = Audit();
  ASSERT_EQ(all.size(), 3u);
  const spb::AuditEntry& created = all[0];
  EXPECT_EQ(created.principal(), "User:alice");
  EXPECT_THAT(created.peer(), HasSubstr("127.0.0.1"));
  EXPECT_EQ(created.method(), "/conduit.log.v1.LogService/CreateTopic");
  ASSERT_EQ(created.checks_size(), 1);
  EXPECT_EQ(created.checks(0).resource_type(), spb::RESOURCE_TYPE_TOPIC);
  EXPECT_EQ(created.checks(0).resource_name(), "a.one");
  EXPECT_EQ(created.checks(0).operation(), spb::OPERATION_CREATE);
  EXPECT_TRUE(created.checks(0).allowed());
  EXPECT_EQ(created.status_code(), 0);
  EXPECT_FALSE(created.denied());

  EXPECT_EQ(all[1].principal(), "User:bob");
  EXPECT_TRUE(all[1].denied());
  EXPECT_EQ(all[1].status_code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_THAT(all[1].checks(0).reason(), HasSubstr("no acl allows"));
  EXPECT_EQ(all[2].principal(), "");
  EXPECT_TRUE(all[2].denied());
  EXPECT_EQ(all[2].status_code(), static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
  EXPECT_EQ(all[2].method(), "/conduit.log.v1.LogService/Produce");

  spb::ListAuditRequest denied;
  denied.set_denied_only(true);
  EXPECT_EQ(Audit(denied).size(), 2u);
  spb::ListAuditRequest by_alice;
  by_alice.set_principal("User:alice");
  EXPECT_EQ(Audit(by_alice).size(), 1u);
  spb::ListAuditRequest on_two;
  on_two.set_resource_name("a.two");
  ASSERT_EQ(Audit(on_two).size(), 1u);

  // The trail itself is for those who may Describe the cluster.
  spb::ListAuditResponse resp;
  EXPECT_EQ(security_->ListAudit(As("alice-token").get(), {}, &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  ASSERT_NO_FATAL_FAILURE(Restart());  // durable, and ids go on
  // The three, and the refused ListAudit; root's listings (Describe) are not admin calls.
  const auto after = Audit();
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[3].id(), 4u);
  EXPECT_EQ(after[3].method(), "/conduit.security.v1.Security/ListAudit");
}

// Client streams are audited like any call while checks can refuse them (the server then
// intercepts them; without identity checks, authorisation or quotas it does not, since nothing
// of theirs can be noted: audit_interceptor.h), and their notes stay on the server.
TEST_F(SecurityRpcTest, ARefusedStreamMessageJoinsTheTrailAndItsNotesStayOnTheServer) {
  ASSERT_NO_FATAL_FAILURE(Start("allow User:alice topic prefixed a. Create,Write\n"));
  ASSERT_TRUE(CreateTopic("alice-token", "a.one").ok());
  auto ctx = As("bob-token");
  auto stream = log_->ProduceStream(ctx.get());
  lpb::ProduceStreamRequest req;
  req.set_sequence(7);
  req.mutable_request()->set_topic("a.one");
  req.mutable_request()->add_records()->set_value("v");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->WritesDone());
  lpb::ProduceStreamResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.answers_size(), 1);
  EXPECT_EQ(resp.answers(0).code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
  EXPECT_TRUE(stream->Finish().ok());
  for (const auto& [key, value] : ctx->GetServerTrailingMetadata()) {
    EXPECT_THAT(std::string(key.data(), key.size()), Not(HasSubstr("conduit-audit")));
  }

  spb::ListAuditRequest by_bob;
  by_bob.set_principal("User:bob");
  const auto entries = Audit(by_bob);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].method(), "/conduit.log.v1.LogService/ProduceStream");
  EXPECT_TRUE(entries[0].denied());
  ASSERT_EQ(entries[0].checks_size(), 1);
  EXPECT_EQ(entries[0].checks(0).resource_name(), "a.one");
  EXPECT_EQ(entries[0].checks(0).operation(), spb::OPERATION_WRITE);
}

// The audit interceptor leaves client-streaming calls alone when checks cannot refuse them,
// which holds only while no such method takes an admin operation or notes a detail: a new
// client-streaming method must be looked at here first.
TEST(CallContract, TheClientStreamingMethodsAreProduceStreamAndConsume) {
  std::vector<std::string> streaming;
  // Every service of every Conduit proto file, each file reached through one of its messages.
  for (const google::protobuf::FileDescriptor* file :
       {lpb::TopicConfig::descriptor()->file(), lpb::ReplicaFetchPartition::descriptor()->file(),
        qpb::QueueConfig::descriptor()->file(), qpb::BridgeFilter::descriptor()->file(),
        cpb::TopicPartitions::descriptor()->file(), spb::AclEntry::descriptor()->file()}) {
    ASSERT_GT(file->service_count(), 0) << file->name();
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int i = 0; i < service->method_count(); ++i) {
        if (service->method(i)->client_streaming()) {
          streaming.push_back(service->method(i)->full_name());
        }
      }
    }
  }
  EXPECT_THAT(streaming, ::testing::UnorderedElementsAre("conduit.log.v1.LogService.ProduceStream",
                                                         "conduit.queue.v1.WorkQueue.Consume"));
}

TEST_F(SecurityRpcTest, AnOffsetResetJoinsTheTrailWithTheGroupsOwnAuditRecord) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(CreateTopic("root-token", "t").ok());
  auto coordinator = ::conduit::coordinator::v1::GroupCoordinator::NewStub(channel_);
  ::conduit::coordinator::v1::ResetOffsetsRequest req;
  req.set_group_id("g");
  req.set_topic("t");
  req.set_actor("ops-runbook");
  req.set_reason("replay");
  req.set_to_earliest(true);
  req.set_execute(true);
  ::conduit::coordinator::v1::ResetOffsetsResponse resp;
  const grpc::Status s = coordinator->ResetOffsets(As("root-token").get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  spb::ListAuditRequest on_g;
  on_g.set_resource_name("g");
  const auto entries = Audit(on_g);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].principal(), "User:root");
  EXPECT_EQ(entries[0].method(), "/conduit.coordinator.v1.GroupCoordinator/ResetOffsets");
  ASSERT_EQ(entries[0].details_size(), 1);
  EXPECT_THAT(entries[0].details(0),
              AllOf(HasSubstr("offset reset executed"),
                    HasSubstr("group audit id " + std::to_string(resp.audit_id()))));
}

}  // namespace
}  // namespace conduit::testing
