// The work queue over real gRPC on 127.0.0.1, as a worker sees it.

#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <prometheus/text_serializer.h>

#include "absl/time/clock.h"
#include "common/grpc/server_runner.h"
#include "common/testing/temp_dir.h"
#include "services/work_queue/queue_node.h"

namespace conduit::testing {
namespace {

namespace qpb = ::conduit::queue::v1;

class QueueServerTest : public ::testing::Test {
 protected:
  QueueServerTest() { Start(); }
  ~QueueServerTest() override { Stop(); }

  void Start() {
    registry_ = std::make_shared<prometheus::Registry>();
    auto node = work_queue::QueueNode::Open(dir_.path(), *registry_, &runtime_);
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    auto server = grpc_util::StartServer({}, {node_->service()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = qpb::WorkQueue::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void Stop() {
    if (!server_) return;
    server_->Shutdown();
    server_.reset();
    node_.reset();
  }

  // Runs one unary call with a deadline.
  template <typename Request, typename Response, typename Method>
  grpc::Status Call(Method method, const Request& request, Response* response,
                    absl::Duration deadline = absl::Seconds(10)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    return ((*stub_).*method)(&ctx, request, response);
  }

  qpb::LeaseResponse Lease(int max_jobs = 1, absl::Duration wait = absl::ZeroDuration()) {
    qpb::LeaseRequest request;
    request.set_queue("emails");
    request.set_worker_id("worker-1");
    request.set_max_jobs(max_jobs);
    request.mutable_max_wait()->set_seconds(absl::ToInt64Seconds(wait));
    qpb::LeaseResponse response;
    EXPECT_TRUE(Call(&qpb::WorkQueue::Stub::Lease, request, &response, wait + absl::Seconds(10)).ok());
    return response;
  }

  // Creates queue "emails" with `n` jobs, payloads "mail 0", "mail 1", ...
  void EmailsWithJobs(int n) {
    qpb::CreateQueueRequest create;
    create.set_name("emails");
    qpb::CreateQueueResponse created;
    ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created).ok());
    qpb::EnqueueRequest enqueue;
    enqueue.set_queue("emails");
    for (int i = 0; i < n; ++i) enqueue.add_jobs()->set_payload("mail " + std::to_string(i));
    qpb::EnqueueResponse enqueued;
    ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::Enqueue, enqueue, &enqueued).ok());
  }
  // An AckBatch of every job of `leased`, with its token.
  static qpb::AckBatchRequest AckAll(const qpb::LeaseResponse& leased) {
    qpb::AckBatchRequest batch;
    batch.set_queue("emails");
    for (const auto& job : leased.jobs()) {
      auto* e = batch.add_jobs();
      e->set_job_id(job.job_id());
      e->set_lease_token(job.lease_token());
    }
    return batch;
  }

  TempDir dir_;
  std::shared_ptr<prometheus::Registry> registry_;
  runtime::Runtime runtime_;
  std::unique_ptr<work_queue::QueueNode> node_;
  std::unique_ptr<grpc_util::RunningServer> server_;
  std::unique_ptr<qpb::WorkQueue::Stub> stub_;
};

TEST_F(QueueServerTest, WorkerLifecycleOverTheWire) {
  qpb::CreateQueueRequest create;
  create.set_name("emails");
  create.mutable_config()->set_max_attempts(2);
  create.mutable_config()->mutable_backoff_initial()->set_seconds(0);
  create.mutable_config()->mutable_backoff_max()->set_seconds(0);
  qpb::CreateQueueResponse created;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created).ok());
  EXPECT_EQ(created.queue().config().visibility_timeout().seconds(), 30);

  // A long-poll Lease is woken by an Enqueue.
  qpb::LeaseResponse polled;
  const absl::Time started = absl::Now();
  std::thread poller([&] { polled = Lease(1, absl::Seconds(20)); });
  qpb::EnqueueRequest enqueue;
  enqueue.set_queue("emails");
  auto* job = enqueue.add_jobs();
  job->set_payload("welcome mail");
  job->set_idempotency_key("user-7-welcome");
  job->set_tenant("shop-7");
  auto* header = job->add_headers();
  header->set_key("template");
  header->set_value("welcome-v2");
  enqueue.add_jobs()->set_payload("poison");
  qpb::EnqueueResponse enqueued;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::Enqueue, enqueue, &enqueued).ok());
  poller.join();
  ASSERT_EQ(polled.jobs_size(), 1);
  EXPECT_LT(absl::Now() - started, absl::Seconds(15));
  const qpb::LeasedJob first = polled.jobs(0);
  EXPECT_EQ(first.payload(), "welcome mail");
  // Enqueue moves the strings out of its request: each lands in its own field.
  EXPECT_EQ(first.tenant(), "shop-7");
  ASSERT_EQ(first.headers_size(), 1);
  EXPECT_EQ(first.headers(0).key(), "template");
  EXPECT_EQ(first.headers(0).value(), "welcome-v2");
  EXPECT_EQ(first.attempt(), 1u);

  qpb::AckRequest ack;
  ack.set_queue("emails");
  ack.set_job_id(first.job_id());
  ack.set_lease_token("not-the-token");
  qpb::AckResponse acked;
  grpc::Status stale = Call(&qpb::WorkQueue::Stub::Ack, ack, &acked);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stale.error_message(), ::testing::HasSubstr("stale"));
  ack.set_lease_token(first.lease_token());
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::Ack, ack, &acked).ok());

  // The poison job fails twice and lands in the dead-letter lane with its history.
  for (int i = 0; i < 2; ++i) {
    qpb::LeaseResponse leased = Lease();
    ASSERT_EQ(leased.jobs_size(), 1) << i;
    EXPECT_EQ(leased.jobs(0).previous_attempts_size(), i);
    qpb::NackRequest nack;
    nack.set_queue("emails");
    nack.set_job_id(leased.jobs(0).job_id());
    nack.set_lease_token(leased.jobs(0).lease_token());
    nack.set_reason("template missing");
    qpb::NackResponse nacked;
    ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::Nack, nack, &nacked).ok());
    EXPECT_EQ(nacked.dead(), i == 1);
  }
  Stop();
  Start();  // everything is durable
  qpb::ListDeadLettersRequest list;
  list.set_queue("emails");
  list.mutable_filter()->set_reason_contains("template");
  qpb::ListDeadLettersResponse dead;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::ListDeadLetters, list, &dead).ok());
  ASSERT_EQ(dead.dead_letters_size(), 1);
  EXPECT_EQ(dead.dead_letters(0).payload(), "poison");
  EXPECT_EQ(dead.dead_letters(0).attempts_size(), 2);
  EXPECT_EQ(dead.dead_letters(0).attempts(1).outcome(), qpb::OUTCOME_NACKED);

  qpb::GetQueueStatsRequest stats_request;
  stats_request.set_queue("emails");
  qpb::GetQueueStatsResponse stats;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::GetQueueStats, stats_request, &stats).ok());
  EXPECT_EQ(stats.dead(), 1);
  EXPECT_EQ(stats.ready(), 0);

  // The idempotency key still maps to the (done) first job.
  enqueue.mutable_jobs()->DeleteSubrange(1, 1);
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::Enqueue, enqueue, &enqueued).ok());
  EXPECT_TRUE(enqueued.jobs(0).duplicate());
  EXPECT_EQ(enqueued.jobs(0).job_id(), first.job_id());

  qpb::RedriveDeadLettersRequest redrive;
  redrive.set_queue("emails");
  qpb::RedriveDeadLettersResponse redriven;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::RedriveDeadLetters, redrive, &redriven).ok());
  EXPECT_TRUE(redriven.dry_run()) << "dry run by default";
  EXPECT_EQ(redriven.job_ids_size(), 1);

  const std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
  EXPECT_THAT(text, ::testing::HasSubstr("conduit_queue_jobs{queue=\"emails\",state=\"dead\"} 1"));
  EXPECT_THAT(text, ::testing::HasSubstr("conduit_queue_oldest_dead_age_seconds{queue=\"emails\"}"));
}

TEST_F(QueueServerTest, AckBatchSettlesEachJobOnItsOwn) {
  ASSERT_NO_FATAL_FAILURE(EmailsWithJobs(3));
  const qpb::LeaseResponse leased = Lease(3);
  ASSERT_EQ(leased.jobs_size(), 3);

  qpb::AckBatchRequest batch = AckAll(leased);
  batch.mutable_jobs(1)->set_lease_token("stale");
  qpb::AckBatchResponse acked;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::AckBatch, batch, &acked).ok());
  ASSERT_EQ(acked.results_size(), 3);
  EXPECT_EQ(acked.results(0).job_id(), leased.jobs(0).job_id());
  EXPECT_EQ(acked.results(0).code(), 0);
  EXPECT_EQ(acked.results(1).code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_THAT(acked.results(1).message(), ::testing::HasSubstr("stale"));
  EXPECT_EQ(acked.results(2).code(), 0);

  // A job listed twice is bad input: the whole call fails and acks nothing.
  batch.mutable_jobs(1)->set_lease_token(leased.jobs(1).lease_token());
  *batch.add_jobs() = batch.jobs(1);
  grpc::Status twice = Call(&qpb::WorkQueue::Stub::AckBatch, batch, &acked);
  EXPECT_EQ(twice.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(twice.error_message(), ::testing::HasSubstr("twice"));
  qpb::GetQueueStatsRequest stats_request;
  stats_request.set_queue("emails");
  qpb::GetQueueStatsResponse stats;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::GetQueueStats, stats_request, &stats).ok());
  EXPECT_EQ(stats.leased(), 1) << "only the stale-token job is still leased";
  EXPECT_EQ(stats.ready(), 0);
}

// Batch leases read ahead during the AckBatch; an operator sees how many records it served.
TEST_F(QueueServerTest, RecordsReadAheadForBatchLeasesAreCountedInMetrics) {
  ASSERT_NO_FATAL_FAILURE(EmailsWithJobs(60));
  const std::string family = "conduit_queue_read_ahead_records_total";
  for (int round = 0; round < 2; ++round) {
    const qpb::LeaseResponse leased = Lease(20);
    ASSERT_EQ(leased.jobs_size(), 20);
    EXPECT_EQ(leased.jobs(0).payload(), "mail " + std::to_string(20 * round));
    qpb::AckBatchResponse acked;
    ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::AckBatch, AckAll(leased), &acked).ok());
    // The answer may come before the read-ahead has landed (it reads after queuing the write):
    // the next lease goes once it has, as a worker's next lease usually would.
    const std::string kept =
        family + "{outcome=\"kept\",queue=\"emails\"} " + std::to_string(20 * (round + 1));
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (prometheus::TextSerializer().Serialize(registry_->Collect()).find(kept) ==
               std::string::npos &&
           absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  const std::string text = prometheus::TextSerializer().Serialize(registry_->Collect());
  // Each AckBatch read the next 20 ahead; the second lease took its 20 from them.
  EXPECT_THAT(text, ::testing::HasSubstr(family + "{outcome=\"kept\",queue=\"emails\"} 40"));
  EXPECT_THAT(text, ::testing::HasSubstr(family + "{outcome=\"served\",queue=\"emails\"} 20"));
}

TEST_F(QueueServerTest, BadInputGetsAClearStatus) {
  qpb::EnqueueRequest enqueue;
  enqueue.set_queue("missing");
  enqueue.add_jobs()->set_payload("x");
  qpb::EnqueueResponse enqueued;
  EXPECT_EQ(Call(&qpb::WorkQueue::Stub::Enqueue, enqueue, &enqueued).error_code(),
            grpc::StatusCode::NOT_FOUND);
  qpb::CreateQueueRequest create;
  create.set_name("bad/name");
  qpb::CreateQueueResponse created;
  EXPECT_EQ(Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  qpb::DiscardDeadLettersRequest discard;
  discard.set_queue("missing");
  qpb::DiscardDeadLettersResponse discarded;
  EXPECT_EQ(Call(&qpb::WorkQueue::Stub::DiscardDeadLetters, discard, &discarded).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT)
      << "a reason is required";
  qpb::AckBatchRequest empty_batch;
  empty_batch.set_queue("missing");
  qpb::AckBatchResponse acked;
  EXPECT_EQ(Call(&qpb::WorkQueue::Stub::AckBatch, empty_batch, &acked).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(QueueServerTest, AQueueKeepsTheDurabilityItWasCreatedWith) {
  qpb::CreateQueueRequest create;
  create.set_name("fast");
  create.mutable_config()->set_durability(qpb::QUEUE_DURABILITY_INTERVAL);
  create.mutable_config()->mutable_flush_interval()->set_nanos(250'000'000);
  qpb::CreateQueueResponse created;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created).ok());
  create.set_name("safe");
  create.clear_config();
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created).ok());
  qpb::ListQueuesResponse listed;
  ASSERT_TRUE(Call(&qpb::WorkQueue::Stub::ListQueues, qpb::ListQueuesRequest(), &listed).ok());
  std::map<std::string, qpb::QueueConfig> configs;
  for (const auto& q : listed.queues()) configs[q.name()] = q.config();
  EXPECT_EQ(configs["fast"].durability(), qpb::QUEUE_DURABILITY_INTERVAL);
  EXPECT_EQ(configs["fast"].flush_interval().nanos(), 250'000'000);
  EXPECT_EQ(configs["safe"].durability(), qpb::QUEUE_DURABILITY_SYNC) << "the default";
  EXPECT_EQ(configs["safe"].flush_interval().nanos(), 100'000'000);

  create.set_name("odd");
  create.mutable_config()->set_durability(static_cast<qpb::QueueDurability>(9));
  grpc::Status refused = Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("durability"), std::string::npos)
      << refused.error_message();
  create.mutable_config()->set_durability(qpb::QUEUE_DURABILITY_INTERVAL);
  create.mutable_config()->mutable_flush_interval()->set_seconds(61);
  refused = Call(&qpb::WorkQueue::Stub::CreateQueue, create, &created);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("flush_interval"), std::string::npos)
      << refused.error_message();
}

}  // namespace
}  // namespace conduit::testing
