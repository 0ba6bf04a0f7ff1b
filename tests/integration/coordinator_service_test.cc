// The group coordinator over real gRPC on 127.0.0.1:0, asking a real log broker (hosted on the
// same server, as in conduit-standalone) for watermarks and append times.
#include <gtest/gtest.h>

#include <prometheus/registry.h>

#include "common/grpc/proto_time.h"
#include "common/grpc/server_runner.h"
#include "common/testing/temp_dir.h"
#include "services/coordinator/coordinator_node.h"
#include "services/log_broker/log_broker_node.h"
#include "tests/support/coordinator_client.h"
#include "tests/support/log_client.h"

namespace conduit::testing {
namespace {

using grpc_util::FromTimestamp;

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto broker = log_broker::LogBrokerNode::Open(dir_.path(), registry_, &runtime_);
    ASSERT_TRUE(broker.ok()) << broker.status();
    broker_ = *std::move(broker);
    coordinator::CoordinatorNodeOptions options;
    options.run_sweeper = false;
    auto node = coordinator::CoordinatorNode::Open(dir_.path(), registry_, &runtime_, options);
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    auto server = grpc_util::StartServer({}, {broker_->service(), node_->service()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    node_->SetBrokerAddress(server_->address());
    log_ = std::make_unique<LogClient>(server_->address());
    groups_ = std::make_unique<CoordinatorClient>(server_->address());
  }
  void TearDown() override {
    broker_->BeginShutdown();
    server_->Shutdown();
    server_.reset();
    node_.reset();
    broker_.reset();
  }

  // Produces `n` records to partition 0 of `topic`, one request each; returns their records as
  // fetched back (with the broker's append times).
  std::vector<logpb::Record> ProduceAndRead(const std::string& topic, int n) {
    for (int i = 0; i < n; ++i) {
      logpb::ProduceRequest req;
      req.set_topic(topic);
      auto* r = req.add_records();
      r->set_partition(0);
      r->set_value("v" + std::to_string(i));
      logpb::ProduceResponse resp;
      EXPECT_TRUE(log_->Produce(req, &resp).ok());
    }
    std::vector<logpb::Record> records;
    EXPECT_TRUE(log_->FetchAll(topic, 0, &records).ok());
    return records;
  }
  // The gauge of `name` labelled with `group`, or -1 when there is none.
  double MetricValue(const std::string& name, const std::string& group) {
    for (const auto& family : registry_.Collect()) {
      if (family.name != name) continue;
      for (const auto& metric : family.metric) {
        for (const auto& label : metric.label) {
          if (label.name == "group" && label.value == group) return metric.gauge.value;
        }
      }
    }
    return -1;
  }

  // How many series of any family carry the label group="`group`".
  int SeriesOf(const std::string& group) {
    int n = 0;
    for (const auto& family : registry_.Collect()) {
      for (const auto& metric : family.metric) {
        for (const auto& label : metric.label) n += label.name == "group" && label.value == group;
      }
    }
    return n;
  }

  TempDir dir_;
  prometheus::Registry registry_;
  runtime::Runtime runtime_;
  std::unique_ptr<log_broker::LogBrokerNode> broker_;
  std::unique_ptr<coordinator::CoordinatorNode> node_;
  std::unique_ptr<grpc_util::RunningServer> server_;
  std::unique_ptr<LogClient> log_;
  std::unique_ptr<CoordinatorClient> groups_;
};

TEST_F(CoordinatorServiceTest, LagSecondsComeFromTheBrokersAppendTimes) {
  ASSERT_TRUE(log_->CreateTopic("clicks", 1).ok());
  std::vector<logpb::Record> records = ProduceAndRead("clicks", 3);
  ASSERT_EQ(records.size(), 3u);
  cpb::HeartbeatResponse member;
  ASSERT_TRUE(groups_->Join("readers", {"clicks"}, &member).ok());
  ASSERT_TRUE(groups_->Commit("readers", member.member_id(), member.member_epoch(), "clicks", 0, 1)
                  .ok());

  const absl::Time before = absl::Now();
  cpb::DescribeGroupResponse d;
  ASSERT_TRUE(groups_->Describe("readers", &d).ok());
  const absl::Time after = absl::Now();
  ASSERT_EQ(d.partitions_size(), 1);
  const cpb::PartitionLag& p = d.partitions(0);
  EXPECT_EQ(p.committed_offset(), 1);
  EXPECT_EQ(p.high_watermark(), 3);
  EXPECT_EQ(p.lag_records(), 2);
  const absl::Time appended = FromTimestamp(records[1].append_time());
  EXPECT_EQ(FromTimestamp(p.first_unprocessed_append_time()), appended);
  EXPECT_GE(p.lag_seconds(), absl::ToDoubleSeconds(before - appended) - 1e-6);
  EXPECT_LE(p.lag_seconds(), absl::ToDoubleSeconds(after - appended) + 1e-6);
  EXPECT_EQ(p.owner_member_id(), member.member_id());
  EXPECT_EQ(d.members_size(), 1);
  EXPECT_EQ(d.state(), cpb::GROUP_STATE_STABLE);

  // Caught up: zero in both units; the metrics follow a sweep.
  ASSERT_TRUE(groups_->Commit("readers", member.member_id(), member.member_epoch(), "clicks", 0, 3)
                  .ok());
  ASSERT_TRUE(groups_->Describe("readers", &d).ok());
  EXPECT_EQ(d.partitions(0).lag_records(), 0);
  EXPECT_EQ(d.partitions(0).lag_seconds(), 0.0);
  ProduceAndRead("clicks", 1);
  node_->coordinator()->SampleLag();
  EXPECT_EQ(MetricValue("conduit_coordinator_group_lag_records", "readers"), 1);
  EXPECT_GE(MetricValue("conduit_coordinator_group_lag_seconds", "readers"), 0);
  EXPECT_EQ(MetricValue("conduit_coordinator_group_members", "readers"), 1);

  // A deleted topic's lag series go away rather than report a frozen lag forever.
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::DeleteTopicRequest del;
  del.set_name("clicks");
  logpb::DeleteTopicResponse deleted;
  ASSERT_TRUE(log_->stub()->DeleteTopic(&ctx, del, &deleted).ok());
  node_->coordinator()->SampleLag();
  EXPECT_EQ(MetricValue("conduit_coordinator_group_lag_records", "readers"), -1);
  EXPECT_EQ(MetricValue("conduit_coordinator_group_lag_seconds", "readers"), -1);
}

TEST_F(CoordinatorServiceTest, ResetDryRunThenApplyOnALiveGroup) {
  ASSERT_TRUE(log_->CreateTopic("orders", 1).ok());
  ProduceAndRead("orders", 5);
  cpb::HeartbeatResponse member;
  ASSERT_TRUE(groups_->Join("billing", {"orders"}, &member).ok());
  ASSERT_TRUE(
      groups_->Commit("billing", member.member_id(), member.member_epoch(), "orders", 0, 5).ok());

  cpb::ResetOffsetsRequest reset;
  reset.set_group_id("billing");
  reset.set_topic("orders");
  reset.set_to_earliest(true);
  reset.set_actor("ops@example");
  reset.set_reason("reprocess after fix");
  cpb::ResetOffsetsResponse dry;
  ASSERT_TRUE(groups_->Call(&cpb::GroupCoordinator::Stub::ResetOffsets, reset, &dry).ok());
  EXPECT_FALSE(dry.executed()) << "a dry run unless execute";
  ASSERT_EQ(dry.partitions_size(), 1);
  EXPECT_EQ(dry.partitions(0).before(), 5);
  EXPECT_EQ(dry.partitions(0).after(), 0);
  cpb::FetchOffsetsResponse offsets;
  ASSERT_TRUE(groups_->FetchOffsets("billing", &offsets).ok());
  EXPECT_EQ(offsets.offsets(0).offset(), 5);

  reset.set_execute(true);
  cpb::ResetOffsetsResponse applied;
  ASSERT_TRUE(groups_->Call(&cpb::GroupCoordinator::Stub::ResetOffsets, reset, &applied).ok());
  EXPECT_TRUE(applied.executed());
  ASSERT_TRUE(groups_->FetchOffsets("billing", &offsets).ok());
  EXPECT_EQ(offsets.offsets(0).offset(), 0);
  EXPECT_EQ(offsets.offsets(0).committed_by(), "reset:ops@example");

  // The live member's next commit from its old position is fenced.
  grpc::Status stale =
      groups_->Commit("billing", member.member_id(), member.member_epoch(), "orders", 0, 5);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << stale.error_message();
  // Its heartbeat says to seek; with the new epoch it resumes from the new offset.
  cpb::HeartbeatResponse next;
  ASSERT_TRUE(groups_->Beat("billing", member, &next).ok());
  ASSERT_EQ(next.reset_partitions_size(), 1);
  EXPECT_EQ(next.reset_partitions(0).topic(), "orders");
  ASSERT_TRUE(
      groups_->Commit("billing", next.member_id(), next.member_epoch(), "orders", 0, 1).ok());

  cpb::ListGroupAuditRequest audit_req;
  audit_req.set_group_id("billing");
  cpb::ListGroupAuditResponse audit;
  ASSERT_TRUE(groups_->Call(&cpb::GroupCoordinator::Stub::ListGroupAudit, audit_req, &audit).ok());
  ASSERT_EQ(audit.entries_size(), 1);
  EXPECT_EQ(audit.entries(0).actor(), "ops@example");
  EXPECT_EQ(audit.entries(0).reason(), "reprocess after fix");
  EXPECT_EQ(audit.entries(0).spec(), "to_earliest");
  EXPECT_FALSE(audit.entries(0).peer().empty());
  EXPECT_EQ(audit.entries(0).partitions(0).before(), 5);
  EXPECT_EQ(audit.entries(0).partitions(0).after(), 0);
}

TEST_F(CoordinatorServiceTest, DeletingAGroupRemovesItsMetricSeries) {
  ASSERT_TRUE(log_->CreateTopic("orders", 1).ok());
  ProduceAndRead("orders", 2);
  cpb::HeartbeatResponse member;
  ASSERT_TRUE(groups_->Join("billing", {"orders"}, &member).ok());
  ASSERT_TRUE(groups_->Commit("billing", member.member_id(), member.member_epoch(), "orders", 0, 1)
                  .ok());
  EXPECT_FALSE(groups_->Commit("billing", member.member_id(), member.member_epoch() + 5, "orders",
                               0, 2)
                   .ok())
      << "a commit from a future epoch is rejected (and counted)";
  node_->coordinator()->SampleLag();
  EXPECT_GT(SeriesOf("billing"), 0);
  cpb::LeaveGroupRequest leave;
  leave.set_group_id("billing");
  leave.set_member_id(member.member_id());
  cpb::LeaveGroupResponse left;
  ASSERT_TRUE(groups_->Call(&cpb::GroupCoordinator::Stub::LeaveGroup, leave, &left).ok());
  cpb::DeleteGroupRequest del;
  del.set_group_id("billing");
  cpb::DeleteGroupResponse deleted;
  ASSERT_TRUE(groups_->Call(&cpb::GroupCoordinator::Stub::DeleteGroup, del, &deleted).ok());
  EXPECT_EQ(SeriesOf("billing"), 0) << "a deleted group leaves no series behind";
}

TEST_F(CoordinatorServiceTest, BadInputGetsClearStatuses) {
  ASSERT_TRUE(log_->CreateTopic("t", 1).ok());
  ProduceAndRead("t", 2);
  cpb::DescribeGroupResponse d;
  EXPECT_EQ(groups_->Describe("nobody", &d).error_code(), grpc::StatusCode::NOT_FOUND);
  cpb::HeartbeatResponse member;
  ASSERT_TRUE(groups_->Join("g", {"t"}, &member).ok());
  EXPECT_EQ(groups_->Commit("g", member.member_id(), member.member_epoch(), "t", 0, 3).error_code(),
            grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(groups_->Commit("g", "m-stranger", 1, "t", 0, 1).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(groups_->Commit("g", member.member_id(), member.member_epoch() + 1, "t", 0, 1)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  cpb::ResetOffsetsRequest no_target;
  no_target.set_group_id("g");
  no_target.set_topic("t");
  cpb::ResetOffsetsResponse r;
  EXPECT_EQ(groups_->Call(&cpb::GroupCoordinator::Stub::ResetOffsets, no_target, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  cpb::ListGroupAuditRequest bad_page;
  bad_page.set_group_id("g");
  bad_page.set_page_token("zzz");
  cpb::ListGroupAuditResponse audit;
  EXPECT_EQ(
      groups_->Call(&cpb::GroupCoordinator::Stub::ListGroupAudit, bad_page, &audit).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  cpb::DeleteGroupRequest del;
  del.set_group_id("g");
  cpb::DeleteGroupResponse deleted;
  EXPECT_EQ(groups_->Call(&cpb::GroupCoordinator::Stub::DeleteGroup, del, &deleted).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION)
      << "it has a member";
  cpb::FetchOffsetsResponse offsets;
  ASSERT_TRUE(groups_->FetchOffsets("g", &offsets).ok());
  EXPECT_EQ(offsets.offsets_size(), 0) << "nothing was committed";
}

}  // namespace
}  // namespace conduit::testing
