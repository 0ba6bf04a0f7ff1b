// SIGKILL a conduit-queue process while workers lease, ack (one by one or with AckBatch) and
// nack (some into the dead-letter lane), restart it on the same data directory, and check after
// every cycle that each job is in exactly one place (one worker acks on a Consume stream): an acked job never comes back, no enqueued
// job is lost, no job is twice in the dead-letter lane, and no job is both dead and live.
//
// Cycles: 3 by default; CONDUIT_CRASH_CYCLES=N for more.

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

namespace qpb = ::conduit::queue::v1;

std::chrono::system_clock::time_point Deadline(absl::Duration d = absl::Seconds(5)) {
  return absl::ToChronoTime(absl::Now() + d);
}

struct Model {
  std::mutex mu;
  std::set<uint64_t> enqueued;       // acknowledged by Enqueue
  std::set<uint64_t> ack_sent;       // an Ack was sent (it may have landed without a reply)
  std::set<uint64_t> acked;          // Ack replied OK: must never come back
  size_t acked_on_stream = 0;        // of those, answered OK on a Consume stream
};

// A worker on a Consume stream (5 credits, one more per ack) until the stream breaks: each ack
// goes on the stream, and one answered OK must never come back, as for Ack.
void ConsumeUntilKilled(const std::string& address, Model& model) {
  auto stub =
      qpb::WorkQueue::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Consume(&ctx);
  qpb::ConsumeRequest start;
  start.mutable_start()->set_queue("jobs");
  start.mutable_start()->set_worker_id("stream");
  start.mutable_start()->set_credits(5);
  qpb::ConsumeResponse m;
  bool open = stream->Write(start);
  while (open && stream->Read(&m)) {
    for (const qpb::SettleResult& settled : m.settled()) {
      if (settled.code() != 0) continue;
      std::lock_guard<std::mutex> lock(model.mu);
      model.acked.insert(settled.job_id());
      ++model.acked_on_stream;
    }
    for (const qpb::LeasedJob& job : m.jobs()) {
      {
        std::lock_guard<std::mutex> lock(model.mu);
        model.ack_sent.insert(job.job_id());
      }
      qpb::ConsumeRequest ack;  // and a credit for the next job
      ack.set_request_id(static_cast<int64_t>(job.job_id()));
      ack.mutable_ack()->set_job_id(job.job_id());
      ack.mutable_ack()->set_lease_token(job.lease_token());
      ack.set_credits(1);
      if (!stream->Write(ack)) {
        open = false;
        break;
      }
    }
  }
  ctx.TryCancel();
  (void)stream->Finish();
}

// Drains the queue: every live job is leased (short leases expire back) until nothing is left
// but the dead-letter lane. Returns (live ids seen, dead ids).
void Inventory(qpb::WorkQueue::Stub* stub, std::set<uint64_t>* live, std::vector<uint64_t>* dead) {
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    qpb::ListDeadLettersRequest list;
    list.set_queue("jobs");
    list.set_page_size(1000);
    list.set_page_token(token);
    qpb::ListDeadLettersResponse page;
    ASSERT_TRUE(stub->ListDeadLetters(&ctx, list, &page).ok());
    for (const auto& d : page.dead_letters()) dead->push_back(d.job_id());
    token = page.next_page_token();
  } while (!token.empty());
  // Leased jobs from before the kill come back when their 1 s leases expire (no backoff).
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(absl::Seconds(10)));
    qpb::LeaseRequest lease;
    lease.set_queue("jobs");
    lease.set_worker_id("inventory");
    lease.set_max_jobs(1000);
    lease.mutable_visibility_timeout()->set_seconds(3600);  // hold them while we count
    lease.mutable_max_wait()->set_seconds(2);
    qpb::LeaseResponse leased;
    ASSERT_TRUE(stub->Lease(&ctx, lease, &leased).ok());
    for (const auto& j : leased.jobs()) {
      EXPECT_TRUE(live->insert(j.job_id()).second) << "job " << j.job_id() << " leased twice";
    }
    grpc::ClientContext sctx;
    sctx.set_deadline(Deadline());
    qpb::GetQueueStatsRequest req;
    req.set_queue("jobs");
    qpb::GetQueueStatsResponse stats;
    ASSERT_TRUE(stub->GetQueueStats(&sctx, req, &stats).ok());
    if (leased.jobs_size() == 0 && stats.ready() == 0 && stats.delayed() == 0 &&
        stats.leased() == static_cast<int64_t>(live->size())) {
      return;
    }
  }
  ADD_FAILURE() << "inventory did not settle";
}

// SIGKILL cycles under producers and workers on a queue of `durability`: a process crash loses
// nothing acknowledged under either (an interval queue's unsynced writes are in the OS).
void EveryJobIsInExactlyOnePlaceAfterSigkill(qpb::QueueDurability durability) {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  ASSERT_NE(bin_dir, nullptr);
  const std::string binary = std::string(bin_dir) + "/conduit-queue";
  const char* cycles_env = std::getenv("CONDUIT_CRASH_CYCLES");
  const int cycles = cycles_env ? std::atoi(cycles_env) : 3;
  TempDir dir;
  Model model;
  std::mt19937 rng(7);

  for (int cycle = 0; cycle <= cycles; ++cycle) {
    ServerProcess server(binary, dir.Sub("data"), dir.path());
    ASSERT_TRUE(server.running()) << "see " << dir.path() << "/server.log";
    auto stub = qpb::WorkQueue::NewStub(
        grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
    if (cycle == 0) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      qpb::CreateQueueRequest create;
      create.set_name("jobs");
      auto* config = create.mutable_config();
      config->mutable_visibility_timeout()->set_seconds(1);
      config->set_max_attempts(3);
      config->set_max_lease_expiries(1000);
      config->mutable_backoff_initial()->set_seconds(0);
      config->mutable_backoff_max()->set_seconds(0);
      config->set_durability(durability);
      qpb::CreateQueueResponse created;
      ASSERT_TRUE(stub->CreateQueue(&ctx, create, &created).ok());
    }
    if (cycle == cycles) {
      // Final check, on a quiet queue.
      std::set<uint64_t> live;
      std::vector<uint64_t> dead;
      Inventory(stub.get(), &live, &dead);
      std::set<uint64_t> dead_set(dead.begin(), dead.end());
      EXPECT_EQ(dead_set.size(), dead.size()) << "a job is twice in the dead-letter lane";
      std::lock_guard<std::mutex> lock(model.mu);
      for (uint64_t id : model.enqueued) {
        const bool is_live = live.contains(id), is_dead = dead_set.contains(id);
        EXPECT_FALSE(is_live && is_dead) << "job " << id << " is both live and dead";
        if (model.acked.contains(id)) {
          EXPECT_FALSE(is_live || is_dead) << "acked job " << id << " came back";
        } else if (!model.ack_sent.contains(id)) {
          EXPECT_TRUE(is_live || is_dead) << "job " << id << " was lost";
        }
      }
      std::printf(
          "queue crash (%s) cycles: %d, jobs enqueued %zu, acked %zu (%zu on the stream), live "
          "%zu, dead %zu\n",
          qpb::QueueDurability_Name(durability).c_str(), cycles, model.enqueued.size(),
          model.acked.size(), model.acked_on_stream, live.size(), dead.size());
      EXPECT_GT(dead.size(), 0u);
      EXPECT_GT(model.acked.size(), 0u);
      EXPECT_GT(model.acked_on_stream, 0u) << "the Consume stream acked nothing";
      server.Kill(SIGTERM);
      break;
    }

    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    threads.emplace_back([&] {  // producer
      auto own = qpb::WorkQueue::NewStub(
          grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline());
        qpb::EnqueueRequest enqueue;
        enqueue.set_queue("jobs");
        for (int i = 0; i < 10; ++i) enqueue.add_jobs()->set_payload("work");
        qpb::EnqueueResponse response;
        if (!own->Enqueue(&ctx, enqueue, &response).ok()) break;
        std::lock_guard<std::mutex> lock(model.mu);
        for (const auto& j : response.jobs()) model.enqueued.insert(j.job_id());
      }
    });
    for (int w = 0; w < 4; ++w) {
      threads.emplace_back([&, w] {
        auto own = qpb::WorkQueue::NewStub(
            grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
        std::mt19937 wrng(w * 1000 + cycle);
        while (!stop.load()) {
          grpc::ClientContext ctx;
          ctx.set_deadline(Deadline());
          qpb::LeaseRequest lease;
          lease.set_queue("jobs");
          lease.set_worker_id("w" + std::to_string(w));
          lease.set_max_jobs(5);
          qpb::LeaseResponse leased;
          if (!own->Lease(&ctx, lease, &leased).ok()) break;
          // Workers 2 and 3 ack a leased batch with one AckBatch; 0 and 1 one Ack per job.
          qpb::AckBatchRequest batch;
          batch.set_queue("jobs");
          for (const auto& job : leased.jobs()) {
            const int roll = std::uniform_int_distribution<int>(0, 9)(wrng);
            grpc::ClientContext c2;
            c2.set_deadline(Deadline());
            if (roll < 7) {
              {
                std::lock_guard<std::mutex> lock(model.mu);
                model.ack_sent.insert(job.job_id());
              }
              if (w >= 2) {
                auto* e = batch.add_jobs();
                e->set_job_id(job.job_id());
                e->set_lease_token(job.lease_token());
                continue;
              }
              qpb::AckRequest ack;
              ack.set_queue("jobs");
              ack.set_job_id(job.job_id());
              ack.set_lease_token(job.lease_token());
              qpb::AckResponse r;
              if (own->Ack(&c2, ack, &r).ok()) {
                std::lock_guard<std::mutex> lock(model.mu);
                model.acked.insert(job.job_id());
              }
            } else {
              qpb::NackRequest nack;
              nack.set_queue("jobs");
              nack.set_job_id(job.job_id());
              nack.set_lease_token(job.lease_token());
              nack.set_reason("flaky");
              if (roll == 9) nack.set_failure_class(qpb::FAILURE_CLASS_PERMANENT);
              qpb::NackResponse r;
              (void)own->Nack(&c2, nack, &r);
            }
          }
          if (batch.jobs_size() == 0) continue;
          grpc::ClientContext c3;
          c3.set_deadline(Deadline());
          qpb::AckBatchResponse acked;
          if (!own->AckBatch(&c3, batch, &acked).ok()) continue;
          std::lock_guard<std::mutex> lock(model.mu);
          for (const auto& r : acked.results()) {
            if (r.code() == 0) model.acked.insert(r.job_id());
          }
        }
      });
    }
    threads.emplace_back([&] { ConsumeUntilKilled(server.address(), model); });
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(400, 1000)(rng)));
    server.Kill(SIGKILL);
    stop.store(true);
    for (auto& t : threads) t.join();
  }
}

TEST(QueueCrash, EveryJobIsInExactlyOnePlaceAfterSigkillOfASyncQueue) {
  EveryJobIsInExactlyOnePlaceAfterSigkill(qpb::QUEUE_DURABILITY_SYNC);
}

TEST(QueueCrash, EveryJobIsInExactlyOnePlaceAfterSigkillOfAnIntervalQueue) {
  EveryJobIsInExactlyOnePlaceAfterSigkill(qpb::QUEUE_DURABILITY_INTERVAL);
}

}  // namespace
}  // namespace conduit::testing
