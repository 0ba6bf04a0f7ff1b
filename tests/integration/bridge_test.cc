// Bridges on a real conduit-standalone: records become jobs with their source,
// the filter and the tenant/priority headers apply, pause/resume/delete and a restart keep every
// record once, and a queue that refuses (max depth) holds the bridge back with its lag visible.

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"
#include "tests/support/bridge_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

class BridgeTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start() {
    const char* bin = std::getenv("CONDUIT_BIN_DIR");
    server_ = std::make_unique<ServerProcess>(
        std::string(bin ? bin : "build/bin") + "/conduit-standalone", dir_.Sub("data"),
        dir_.path());
    ASSERT_TRUE(server_->running()) << "see " << dir_.path() << "/server.log";
    log_ = std::make_unique<LogClient>(server_->address());
    client_ = std::make_unique<BridgeClient>(server_->address());
  }
  void Restart() {
    server_->Kill(SIGTERM);
    Start();
  }

  // Records keyed `key`, with header type=`type` and merchant=m<i % 3>, to partition i % 2.
  void Produce(int from, int count, const std::string& type, const std::string& key = "sku-1") {
    logpb::ProduceRequest req;
    req.set_topic("events");
    for (int i = from; i < from + count; ++i) {
      auto* r = req.add_records();
      r->set_partition(i % 2);
      r->set_key(key);
      r->set_value(absl::StrCat("v", i));
      r->set_event_id(absl::StrCat("e", i));
      auto* h = r->add_headers();
      h->set_key("type");
      h->set_value(type);
      h = r->add_headers();
      h->set_key("merchant");
      h->set_value(absl::StrCat("m", i % 3));
    }
    logpb::ProduceResponse resp;
    ASSERT_TRUE(log_->Produce(req, &resp).ok());
  }

  qpb::BridgeSpec Spec() {
    qpb::BridgeSpec s;
    s.set_name("b");
    s.set_topic("events");
    s.set_queue("jobs");
    return s;
  }

  template <typename Pred>
  static bool Eventually(Pred ready, absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!ready()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<LogClient> log_;
  std::unique_ptr<BridgeClient> client_;
};

TEST_F(BridgeTest, RecordsBecomeJobsWithTheirSourceThroughTheFilter) {
  ASSERT_TRUE(log_->CreateTopic("events", 2).ok());
  ASSERT_TRUE(client_->CreateQueue("jobs").ok());
  qpb::BridgeSpec spec = Spec();
  spec.mutable_filter()->set_header("type");
  spec.mutable_filter()->set_header_value("price-changed");
  spec.set_tenant_header("merchant");
  EXPECT_EQ(client_
                ->CreateBridge([&] {
                  qpb::BridgeSpec s = spec;
                  s.set_queue("nope");
                  return s;
                }())
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(client_->CreateBridge(spec).ok());
  EXPECT_EQ(client_->CreateBridge(spec).error_code(), grpc::StatusCode::ALREADY_EXISTS);

  Produce(0, 20, "price-changed");
  Produce(20, 10, "stock-changed");
  ASSERT_TRUE(Eventually([&] { return client_->Describe("b").records_filtered() == 10; }));
  ASSERT_TRUE(Eventually([&] { return client_->Jobs("jobs") == 20; }));
  std::set<std::pair<int32_t, int64_t>> sources;
  for (const qpb::LeasedJob& job : client_->LeaseAll("jobs")) {
    const int i = std::stoi(job.payload().substr(1));
    EXPECT_LT(i, 20) << "only price changes pass the filter";
    EXPECT_EQ(job.tenant(), absl::StrCat("m", i % 3)) << "tenant from the merchant header";
    EXPECT_EQ(job.source().topic(), "events");
    EXPECT_EQ(job.source().partition(), i % 2);
    EXPECT_EQ(BridgeClient::HeaderOf(job, "conduit-source-offset"),
              std::to_string(job.source().offset()));
    EXPECT_EQ(BridgeClient::HeaderOf(job, "conduit-event-id"), absl::StrCat("e", i));
    EXPECT_EQ(BridgeClient::HeaderOf(job, "type"), "price-changed") << "headers copied";
    EXPECT_TRUE(sources.emplace(job.source().partition(), job.source().offset()).second);
  }
  EXPECT_EQ(sources.size(), 20u);
  qpb::BridgeInfo info;
  ASSERT_TRUE(Eventually([&] {
    info = client_->Describe("b");
    return info.lag_error().empty() && info.lag_records() == 0;
  })) << info.ShortDebugString();
  EXPECT_EQ(info.state(), qpb::BRIDGE_STATE_RUNNING);
  EXPECT_EQ(info.records_bridged(), 20);
  EXPECT_EQ(info.spec().group(), "bridge.b");
}

TEST_F(BridgeTest, PausedBridgesLagResumeAfterARestartAndDeletedOnesStop) {
  ASSERT_TRUE(log_->CreateTopic("events", 2).ok());
  ASSERT_TRUE(client_->CreateQueue("jobs").ok());
  ASSERT_TRUE(client_->CreateBridge(Spec()).ok());
  Produce(0, 10, "t");
  ASSERT_TRUE(Eventually([&] { return client_->Jobs("jobs") == 10; }));
  ASSERT_TRUE((client_->ByName<qpb::PauseBridgeRequest, qpb::PauseBridgeResponse>(
                   &qpb::Bridges::Stub::PauseBridge, "b"))
                  .ok());
  Produce(10, 6, "t");
  qpb::BridgeInfo info;
  ASSERT_TRUE(Eventually([&] {
    info = client_->Describe("b");
    return info.lag_records() == 6;
  })) << info.ShortDebugString();
  EXPECT_EQ(info.state(), qpb::BRIDGE_STATE_PAUSED);
  EXPECT_EQ(client_->Jobs("jobs"), 10) << "a paused bridge reads nothing";

  Restart();
  EXPECT_EQ(client_->Describe("b").state(), qpb::BRIDGE_STATE_PAUSED) << "paused is durable";
  ASSERT_TRUE((client_->ByName<qpb::ResumeBridgeRequest, qpb::ResumeBridgeResponse>(
                   &qpb::Bridges::Stub::ResumeBridge, "b"))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return client_->Jobs("jobs") == 16; }));
  Restart();  // running bridges start again with the server
  Produce(16, 4, "t");
  ASSERT_TRUE(Eventually([&] { return client_->Jobs("jobs") == 20; }));
  std::set<std::string> payloads;
  for (const auto& job : client_->LeaseAll("jobs")) payloads.insert(job.payload());
  EXPECT_EQ(payloads.size(), 20u) << "every record once, across pause, resume and restarts";

  ASSERT_TRUE((client_->ByName<qpb::DeleteBridgeRequest, qpb::DeleteBridgeResponse>(
                   &qpb::Bridges::Stub::DeleteBridge, "b"))
                  .ok());
  grpc::Status described;
  client_->Describe("b", &described);
  EXPECT_EQ(described.error_code(), grpc::StatusCode::NOT_FOUND);
  Produce(20, 5, "t");
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(client_->Jobs("jobs"), 20) << "a deleted bridge enqueues nothing";
}

TEST_F(BridgeTest, AQueueAtItsDepthLimitHoldsTheBridgeBackWithItsLagVisible) {
  ASSERT_TRUE(log_->CreateTopic("events", 2).ok());
  ASSERT_TRUE(client_->CreateQueue("jobs", /*max_depth=*/10).ok());
  ASSERT_TRUE(client_->CreateBridge(Spec()).ok());
  for (int i = 0; i < 30; i += 5) Produce(i, 5, "t");  // batches of 5: some fit under the limit
  qpb::BridgeInfo info;
  ASSERT_TRUE(Eventually([&] {
    info = client_->Describe("b");
    return info.state() == qpb::BRIDGE_STATE_BACKING_OFF && info.lag_records() > 0;
  })) << info.ShortDebugString();
  EXPECT_THAT(info.last_error(), ::testing::HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_LE(client_->Jobs("jobs"), 10);

  std::set<std::string> payloads;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& job : client_->LeaseAll("jobs")) {
          EXPECT_TRUE(payloads.insert(job.payload()).second) << job.payload() << " twice";
          EXPECT_TRUE(client_->Ack("jobs", job).ok());
        }
        return payloads.size() == 30;
      },
      absl::Seconds(60)))
      << payloads.size() << " of 30 drained";
  ASSERT_TRUE(Eventually([&] {
    info = client_->Describe("b");
    return info.state() == qpb::BRIDGE_STATE_RUNNING && info.lag_records() == 0;
  })) << info.ShortDebugString();
}

// A log consumer's dead letter goes back to its source topic with its key, event id and own
// headers (not the conduit-* evidence), and leaves the lane once acknowledged; a dry run moves
// nothing, and a letter with no topic to go to is refused and stays.
TEST_F(BridgeTest, DeadLettersRedriveToTheirSourceTopicWithKeyAndEventId) {
  ASSERT_TRUE(log_->CreateTopic("events", 1).ok());
  ASSERT_TRUE(client_->CreateQueue("dlq").ok());
  qpb::AddDeadLettersRequest add;
  add.set_queue("dlq");
  auto letter = [&](bool with_source) {
    qpb::NewDeadLetter* d = add.add_dead_letters();
    d->set_reason("price without a currency");
    qpb::NewJob* job = d->mutable_job();
    job->set_payload(with_source ? "price 90" : "orphan");
    job->set_idempotency_key(with_source ? "k1" : "k2");
    for (const auto& [k, v] :
         std::vector<std::pair<std::string, std::string>>{{"type", "price-changed"},
                                                          {"conduit-source-key", "sku-9"},
                                                          {"conduit-event-id", "evt-9"},
                                                          {"conduit-consumer-group", "search"}}) {
      auto* h = job->add_headers();
      h->set_key(k);
      h->set_value(v);
    }
    if (with_source) job->mutable_source()->set_topic("events");
  };
  letter(true);
  letter(false);
  qpb::AddDeadLettersResponse added;
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    ASSERT_TRUE(client_->queue()->AddDeadLetters(&ctx, add, &added).ok());
  }
  auto redrive = [&](bool dry_run, qpb::RedriveDeadLettersResponse* resp) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    qpb::RedriveDeadLettersRequest req;
    req.set_queue("dlq");
    req.add_job_ids(added.jobs(0).job_id());
    req.add_job_ids(added.jobs(1).job_id());
    req.set_dry_run(dry_run);
    req.mutable_to_topic();  // each letter's source topic
    return client_->queue()->RedriveDeadLetters(&ctx, req, resp);
  };
  qpb::RedriveDeadLettersResponse dry;
  ASSERT_TRUE(redrive(true, &dry).ok());
  EXPECT_EQ(dry.job_ids_size(), 1);
  EXPECT_EQ(client_->Stats("dlq").dead(), 2) << "a dry run moves nothing";
  std::vector<logpb::Record> records;
  ASSERT_TRUE(log_->FetchAll("events", 0, &records).ok());
  EXPECT_TRUE(records.empty());

  qpb::RedriveDeadLettersResponse done;
  ASSERT_TRUE(redrive(false, &done).ok());
  ASSERT_EQ(done.job_ids_size(), 1);
  EXPECT_EQ(done.job_ids(0), added.jobs(0).job_id());
  ASSERT_EQ(done.refused_job_ids_size(), 1) << "no source topic and none named";
  EXPECT_EQ(done.refused_job_ids(0), added.jobs(1).job_id());
  EXPECT_EQ(client_->Stats("dlq").dead(), 1) << "the redriven letter left the lane";
  ASSERT_TRUE(log_->FetchAll("events", 0, &records).ok());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].key(), "sku-9");
  EXPECT_EQ(records[0].value(), "price 90");
  EXPECT_EQ(records[0].event_id(), "evt-9");
  ASSERT_EQ(records[0].headers_size(), 1) << "the conduit-* evidence is not re-produced";
  EXPECT_EQ(records[0].headers(0).key(), "type");
}

}  // namespace
}  // namespace conduit::testing
