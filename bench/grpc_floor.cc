// The floor gRPC sets on this machine for Conduit's one-record-per-call
// workloads: a server that speaks LogService's CreateTopic, ListTopics, Produce
// and ProduceStream but stores nothing and answers at once (an offset counter),
// and WorkQueue's CreateQueue, DeleteQueue, Enqueue, Lease and AckBatch the same
// way (a Lease hands out as many made-up jobs as asked for, each with a 100-byte
// payload and the fields a Conduit lease fills in), built with
// grpc::ServerBuilder's defaults and no interceptors. peer_bench
// --system=grpc-floor drives it with exactly the code that drives
// conduit-standalone, so Conduit's figure ÷ this one is the share of gRPC's
// ceiling Conduit reaches, and a target above this figure cannot be met through
// that RPC here, whatever the broker does. Not a test double: nothing checks
// behaviour against it.
//
//   grpc_floor --port_file=FILE      (listens on 127.0.0.1, an ephemeral port;
//   SIGTERM stops it)

#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc/stepped_reactor.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, port_file, "", "where to write the port listened on");

namespace {

namespace lpb = conduit::log::v1;
namespace grpc_util = conduit::grpc_util;
namespace qpb = conduit::queue::v1;

grpc::ServerUnaryReactor* Answered(grpc::CallbackServerContext* ctx) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t ns = absl::ToUnixNanos(t);
  out->set_seconds(ns / 1'000'000'000);
  out->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
}

class QueueFloorService final : public qpb::WorkQueue::CallbackService {
 public:
  grpc::ServerUnaryReactor* CreateQueue(grpc::CallbackServerContext* ctx,
                                        const qpb::CreateQueueRequest*,
                                        qpb::CreateQueueResponse*) override {
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* DeleteQueue(grpc::CallbackServerContext* ctx,
                                        const qpb::DeleteQueueRequest*,
                                        qpb::DeleteQueueResponse*) override {
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* Enqueue(grpc::CallbackServerContext* ctx,
                                    const qpb::EnqueueRequest* request,
                                    qpb::EnqueueResponse* response) override {
    for (int i = 0; i < request->jobs_size(); ++i) {
      response->add_jobs()->set_job_id(next_id_.fetch_add(1));
    }
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* ctx,
                                  const qpb::LeaseRequest* request,
                                  qpb::LeaseResponse* response) override {
    const absl::Time now = absl::Now();
    const int jobs = request->max_jobs() == 0 ? 1 : request->max_jobs();
    for (int i = 0; i < jobs; ++i) {
      const uint64_t id = leased_.fetch_add(1);
      qpb::LeasedJob* job = response->add_jobs();
      job->set_job_id(id);
      job->set_lease_token(absl::StrFormat("%x-%x-%016x", id, 1, id * 0x9E3779B97F4A7C15ull));
      job->set_attempt(1);
      SetTime(now + absl::Seconds(60), job->mutable_deadline());
      job->set_payload(std::string(100, 'j'));
      SetTime(now, job->mutable_enqueued_at());
    }
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* AckBatch(grpc::CallbackServerContext* ctx,
                                     const qpb::AckBatchRequest* request,
                                     qpb::AckBatchResponse* response) override {
    for (const auto& job : request->jobs()) {
      auto* r = response->add_results();
      r->set_job_id(job.job_id());
      r->set_code(0);
    }
    return Answered(ctx);
  }

 private:
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> leased_{1};
};

class FloorService final : public lpb::LogService::CallbackService {
 public:
  grpc::ServerUnaryReactor* CreateTopic(grpc::CallbackServerContext* ctx,
                                        const lpb::CreateTopicRequest*,
                                        lpb::CreateTopicResponse*) override {
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* ListTopics(grpc::CallbackServerContext* ctx,
                                       const lpb::ListTopicsRequest*,
                                       lpb::ListTopicsResponse*) override {
    return Answered(ctx);
  }
  grpc::ServerUnaryReactor* Produce(grpc::CallbackServerContext* ctx,
                                    const lpb::ProduceRequest* request,
                                    lpb::ProduceResponse* response) override {
    for (const auto& record : request->records()) {
      auto* p = response->add_positions();
      p->set_partition(record.partition());
      p->set_offset(next_offset_.fetch_add(1));
    }
    return Answered(ctx);
  }
  grpc::ServerBidiReactor<lpb::ProduceStreamRequest, lpb::ProduceStreamResponse>* ProduceStream(
      grpc::CallbackServerContext*) override {
    return new StreamReactor(&next_offset_);
  }

 private:
  // The broker's ProduceStream protocol without the broker: every message is
  // answered as soon as it is read; the answers ready when a write can start go
  // in one response (one write in flight, gRPC's rule), and at most kWindow
  // messages are unanswered or unwritten (the broker's window).
  class StreamReactor final
      : public grpc_util::SteppedReactor<
            StreamReactor,
            grpc::ServerBidiReactor<lpb::ProduceStreamRequest, lpb::ProduceStreamResponse>> {
   public:
    static constexpr size_t kWindow = 1024;
    // Answers go out 100 at a time (or when the caller half-closes or the
    // window is full): fewer responses than a broker, which answers as records
    // become durable, can promise, so that this bounds what reading one-record
    // messages costs in gRPC alone.
    static constexpr size_t kAnswerEvery = 100;

    explicit StreamReactor(std::atomic<int64_t>* next_offset) : next_offset_(next_offset) {
      StartRead(&request_);
    }

    void OnReadDone(bool ok) override {
      React([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        reading_ = false;
        if (!ok) {
          reads_done_ = true;
        } else {
          lpb::ProduceStreamResponse::Answer& answer = pending_.emplace_back();
          answer.set_sequence(request_.sequence());
          for (const auto& record : request_.request().records()) {
            auto* p = answer.add_positions();
            p->set_partition(record.partition());
            p->set_offset(next_offset_->fetch_add(1));
          }
        }
      });
    }

   private:
    friend class grpc_util::SteppedReactor<StreamReactor, ServerBidiReactor>;
    // The next write, read or finish, decided under mu_ and started by Run once it is released
    // (as the broker's reactor does: a reaction may run on the thread that starts an operation).
    struct Steps {
      bool write = false;
      bool read = false;
      std::optional<grpc::Status> finish;
    };
    Steps NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      Steps steps;
      const bool window_full = pending_.size() + in_flight_ >= kWindow;
      if (!broken_ && !writing_ && !pending_.empty() &&
          (pending_.size() >= kAnswerEvery || reads_done_ || window_full)) {
        writing_ = steps.write = true;
        response_.clear_answers();
        while (!pending_.empty()) {
          *response_.add_answers() = std::move(pending_.front());
          pending_.pop_front();
          ++in_flight_;
        }
      }
      if (!broken_ && !reading_ && !reads_done_ && pending_.size() + in_flight_ < kWindow) {
        reading_ = steps.read = true;
      }
      if (!finished_ && !reading_ && !writing_ && (broken_ || (reads_done_ && pending_.empty()))) {
        finished_ = true;
        steps.finish = broken_ ? grpc::Status::CANCELLED : grpc::Status::OK;
      }
      return steps;
    }
    void Run(Steps steps) {
      if (steps.write) StartWrite(&response_);  // not touched again until OnWriteDone
      if (steps.read) StartRead(&request_);
      if (steps.finish) Finish(*steps.finish);
    }

    std::atomic<int64_t>* const next_offset_;
    lpb::ProduceStreamRequest request_;  // one read at a time
    std::deque<lpb::ProduceStreamResponse::Answer> pending_ ABSL_GUARDED_BY(mu_);
    lpb::ProduceStreamResponse response_ ABSL_GUARDED_BY(mu_);  // in_flight_ counts its answers
  };

  std::atomic<int64_t> next_offset_{0};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the servers do
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  FloorService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  QueueFloorService queue_service;
  builder.RegisterService(&queue_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "grpc_floor: cannot listen on 127.0.0.1\n");
    return 1;
  }
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    std::ofstream(path + ".tmp") << port << "\n";
    std::rename((path + ".tmp").c_str(), path.c_str());
  }
  std::printf("grpc_floor listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  server->Shutdown();
  return 0;
}
