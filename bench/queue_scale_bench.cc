// The queue beyond RAM: a deep queue on a conduit-queue child process, through
// its public gRPC API only. Prints figures, asserts nothing.
//
//   queue_scale_bench [--jobs=10000000] [--payload_bytes=100] [--cycle_seconds=10]
//                     [--binary=<this program's dir>/conduit-queue] [--data_dir=<temp dir>]
//                     [--clients=4] [--workers=4]
//
// 1. Enqueue --jobs jobs (random bytes, so compression does not flatter the disk) from --clients
//    concurrent clients, 1000 jobs per request: jobs/s; then the server's VmRSS and VmHWM.
// 2. At that depth, --cycle_seconds each of --workers workers leasing and acking: Lease 100 +
//    AckBatch, then Lease 1 + Ack: jobs/s (a run stops early after a quarter of the jobs, so
//    that both run at about the same depth and the restart recovers at least half).
// 3. SIGKILL the server and start it again on the same data dir: seconds from spawn to the first
//    GetQueueStats answer ("restart-to-serving"), then VmRSS, VmHWM and the depth it shows.
// Then SIGTERM. The server is stopped on every way out, also when the bench is interrupted
// (SIGINT, SIGTERM, SIGHUP, or SIGPIPE when its output is closed, kill the server, which fails
// the calls in flight); the temp dir is removed.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/process_memory.h"
#include "tests/support/recovering_server.h"

ABSL_FLAG(int64_t, jobs, 10'000'000, "jobs to enqueue");
ABSL_FLAG(int, payload_bytes, 100, "bytes per job payload");
ABSL_FLAG(double, cycle_seconds, 10, "seconds per lease+ack run");
ABSL_FLAG(std::string, binary, "", "conduit-queue to run (default: next to this program)");
ABSL_FLAG(std::string, data_dir, "",
          "the server's data dir, without a queue 'scale' (default: a temp dir, removed)");
ABSL_FLAG(int, clients, 4, "concurrent enqueue clients");
ABSL_FLAG(int, workers, 4, "concurrent lease+ack workers");

namespace conduit::bench {
namespace {

namespace qpb = ::conduit::queue::v1;
using testing::ProcessMemory;
using testing::ReadProcessMemory;

constexpr char kQueue[] = "scale";
constexpr int kBatch = 1000;

// The server's pid for the signal handler (-1: none running).
std::atomic<pid_t> running_server{-1};
std::atomic<bool> interrupted{false};

void KillServerOnSignal(int signal) {
  interrupted = true;
  const pid_t pid = running_server.load();
  if (pid > 0) ::kill(pid, SIGKILL);  // the calls in flight fail and the bench winds down
  // A second SIGINT, SIGTERM or SIGHUP ends the bench at once. SIGPIPE (the reader of its output
  // went away, as with `| head`) comes again with each row written while winding down.
  if (signal != SIGPIPE) std::signal(signal, SIG_DFL);
}

auto Deadline(absl::Duration d = absl::Seconds(30)) { return absl::ToChronoTime(absl::Now() + d); }

// Stops the server and forgets it for the signal handler.
void Stop(testing::RecoveringServer& server, int signal) {
  running_server = -1;
  server.Kill(signal);
}

std::unique_ptr<qpb::WorkQueue::Stub> StubFor(const std::string& address) {
  return qpb::WorkQueue::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

grpc::Status Stats(const std::string& address, qpb::GetQueueStatsResponse* stats,
                   absl::Duration timeout = absl::Seconds(10)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  qpb::GetQueueStatsRequest request;
  request.set_queue(kQueue);
  return StubFor(address)->GetQueueStats(&ctx, request, stats);
}

void Row(const std::string& figure, const std::string& value) {
  std::printf("| %-46s | %-50s |\n", figure.c_str(), value.c_str());
  std::fflush(stdout);
}

// The last 2 KiB of a log file.
std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 2048 ? text.substr(text.size() - 2048) : text;
}

std::string Memory(const ProcessMemory& m) {
  return absl::StrFormat("%.0f / %.0f MiB", m.rss_mib(), m.hwm_mib());
}

// Enqueues `jobs` from `clients` clients, 1000 per request; the first error, if any.
absl::Status EnqueueAll(const std::string& address, int64_t jobs, int payload_bytes, int clients) {
  std::string random(1 << 20, '\0');
  std::mt19937_64 rng(18);
  for (char& c : random) c = static_cast<char>(rng());
  const int64_t batches = (jobs + kBatch - 1) / kBatch;
  std::atomic<int64_t> next{0};
  std::mutex mu;
  absl::Status error;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = StubFor(address);
      for (int64_t b = next++; b < batches; b = next++) {
        qpb::EnqueueRequest request;
        request.set_queue(kQueue);
        for (int64_t seq = b * kBatch; seq < std::min(jobs, (b + 1) * kBatch); ++seq) {
          const size_t at = (seq * 7919) % (random.size() - payload_bytes);
          request.add_jobs()->set_payload(random.substr(at, payload_bytes));
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline());
        qpb::EnqueueResponse response;
        grpc::Status status = stub->Enqueue(&ctx, request, &response);
        if (!status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          error = absl::UnavailableError(absl::StrCat("enqueue: ", status.error_message()));
          next = batches;  // the others stop too
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return error;
}

struct CycleRun {
  int64_t acked = 0;
  double seconds = 0;
  bool emptied = false;  // a worker found the queue empty before the time was up
  bool capped = false;   // the run took `budget` jobs before the time was up
};

// `workers` workers lease `lease_jobs` jobs at a time for `seconds` and ack each lease (with one
// Ack for a single job, else AckBatch); they stop early after about `budget` jobs, so that the
// depth stays about what it was.
absl::StatusOr<CycleRun> LeaseAndAck(const std::string& address, int workers, int lease_jobs,
                                     absl::Duration seconds, int64_t budget) {
  std::atomic<int64_t> acked{0}, asked{0};
  std::atomic<bool> emptied{false}, capped{false};
  std::mutex mu;
  absl::Status error;
  const absl::Time start = absl::Now(), end = start + seconds;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto stub = StubFor(address);
      auto fail = [&](const std::string& what, const grpc::Status& status) {
        std::lock_guard<std::mutex> lock(mu);
        error = absl::UnavailableError(absl::StrCat(what, ": ", status.error_message()));
      };
      while (absl::Now() < end && !emptied.load() && error.ok()) {
        if (asked.fetch_add(lease_jobs) >= budget) return capped.store(true);
        grpc::ClientContext lctx;
        lctx.set_deadline(Deadline());
        qpb::LeaseRequest lease;
        lease.set_queue(kQueue);
        lease.set_worker_id(absl::StrCat("w", w));
        lease.set_max_jobs(lease_jobs);
        lease.mutable_visibility_timeout()->set_seconds(60);
        qpb::LeaseResponse leased;
        if (grpc::Status s = stub->Lease(&lctx, lease, &leased); !s.ok()) return fail("lease", s);
        if (leased.jobs_size() == 0) return emptied.store(true);
        grpc::ClientContext actx;
        actx.set_deadline(Deadline());
        if (leased.jobs_size() == 1) {
          qpb::AckRequest ack;
          ack.set_queue(kQueue);
          ack.set_job_id(leased.jobs(0).job_id());
          ack.set_lease_token(leased.jobs(0).lease_token());
          qpb::AckResponse response;
          if (grpc::Status s = stub->Ack(&actx, ack, &response); !s.ok()) return fail("ack", s);
          ++acked;
          continue;
        }
        qpb::AckBatchRequest ack;
        ack.set_queue(kQueue);
        for (const qpb::LeasedJob& job : leased.jobs()) {
          auto* entry = ack.add_jobs();
          entry->set_job_id(job.job_id());
          entry->set_lease_token(job.lease_token());
        }
        qpb::AckBatchResponse response;
        if (grpc::Status s = stub->AckBatch(&actx, ack, &response); !s.ok()) {
          return fail("ack batch", s);
        }
        for (const auto& r : response.results()) acked += r.code() == 0 ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!error.ok()) return error;
  return CycleRun{acked.load(), absl::ToDoubleSeconds(absl::Now() - start), emptied.load(),
                  capped.load()};
}

// Starts the server and waits until GetQueueStats answers (CreateQueue first on a fresh data
// dir); the seconds that took.
absl::StatusOr<double> StartServing(std::unique_ptr<testing::RecoveringServer>& server,
                                    const std::string& binary, const std::string& data_dir,
                                    const std::string& work, bool create, std::string* address) {
  const absl::Time spawned = absl::Now();
  server = std::make_unique<testing::RecoveringServer>(binary, data_dir, work);
  running_server = server->pid();
  if (interrupted) return absl::CancelledError("interrupted");  // before the handler knew the pid
  if (absl::Status s = server->WaitForPort(absl::Minutes(30)); !s.ok()) return s;
  *address = server->address();
  if (create) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    qpb::CreateQueueRequest request;
    request.set_name(kQueue);
    qpb::CreateQueueResponse response;
    grpc::Status s = StubFor(*address)->CreateQueue(&ctx, request, &response);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("create queue: ", s.error_message()));
  }
  for (const absl::Time give_up = absl::Now() + absl::Minutes(5); absl::Now() < give_up;) {
    qpb::GetQueueStatsResponse stats;
    if (Stats(*address, &stats, absl::Seconds(1)).ok()) {
      return absl::ToDoubleSeconds(absl::Now() - spawned);
    }
    absl::SleepFor(absl::Milliseconds(10));  // a fresh server: polling until it answers
  }
  return absl::DeadlineExceededError("conduit-queue bound its port but never answered");
}

int Run() {
  const int64_t jobs = absl::GetFlag(FLAGS_jobs);
  const int payload_bytes = absl::GetFlag(FLAGS_payload_bytes);
  const int clients = absl::GetFlag(FLAGS_clients), workers = absl::GetFlag(FLAGS_workers);
  const absl::Duration cycle = absl::Seconds(absl::GetFlag(FLAGS_cycle_seconds));
  if (jobs <= 0 || payload_bytes <= 0 || payload_bytes > (1 << 19) || clients <= 0 ||
      workers <= 0) {
    std::fprintf(stderr, "--jobs, --clients, --workers > 0; --payload_bytes 1..524288\n");
    return 2;
  }
  std::string binary = absl::GetFlag(FLAGS_binary);
  if (binary.empty()) {
    std::error_code error;
    binary = std::filesystem::read_symlink("/proc/self/exe", error).parent_path() / "conduit-queue";
  }
  testing::TempDir temp;  // the server's log and port file, and by default its data
  const std::string data_dir =
      absl::GetFlag(FLAGS_data_dir).empty() ? temp.Sub("data") : absl::GetFlag(FLAGS_data_dir);
  auto failed = [&](const absl::Status& status) {
    if (interrupted) {
      std::fprintf(stderr, "queue_scale_bench: interrupted; the server is stopped\n");
      return 130;
    }
    std::fprintf(stderr, "queue_scale_bench: %s\nthe server's log ends:\n%s\n",
                 status.ToString().c_str(), LogTail(temp.Sub("server.log")).c_str());
    return 1;
  };

  std::printf(
      "queue_scale_bench: %lld jobs of %d B, %d clients x %d jobs/request, %d workers, "
      "%.0f s per lease+ack run, restart after SIGKILL; %u cores; server %s\n",
      static_cast<long long>(jobs), payload_bytes, clients, kBatch, workers,
      absl::ToDoubleSeconds(cycle), std::thread::hardware_concurrency(), binary.c_str());
  Row("figure", "value");
  Row(std::string(46, '-'), std::string(50, '-'));
  std::unique_ptr<testing::RecoveringServer> server;
  std::string address;
  if (auto started = StartServing(server, binary, data_dir, temp.path(), true, &address);
      !started.ok()) {
    return failed(started.status());
  }

  const absl::Time enqueue_start = absl::Now();
  if (absl::Status s = EnqueueAll(address, jobs, payload_bytes, clients); !s.ok()) {
    return failed(s);
  }
  const double enqueue_seconds = absl::ToDoubleSeconds(absl::Now() - enqueue_start);
  Row("enqueue", absl::StrFormat("%.0f jobs/s (%.1f s)", jobs / enqueue_seconds, enqueue_seconds));
  Row("server VmRSS / VmHWM after enqueue", Memory(ReadProcessMemory(server->pid())));

  int64_t acked = 0;
  for (int lease_jobs : {100, 1}) {
    absl::StatusOr<CycleRun> run = LeaseAndAck(address, workers, lease_jobs, cycle, jobs / 4);
    if (!run.ok()) return failed(run.status());
    acked += run->acked;
    Row(absl::StrFormat("lease %d + %s, %d workers", lease_jobs,
                        lease_jobs == 1 ? "Ack" : "AckBatch", workers),
        absl::StrFormat("%.0f jobs/s (%lld in %.1f s%s)", run->acked / run->seconds,
                        static_cast<long long>(run->acked), run->seconds,
                        run->emptied  ? ", ran empty"
                        : run->capped ? ", capped at jobs/4"
                                      : ""));
  }
  Row("server VmRSS / VmHWM after lease+ack", Memory(ReadProcessMemory(server->pid())));

  Stop(*server, SIGKILL);
  absl::StatusOr<double> restart =
      StartServing(server, binary, data_dir, temp.path(), false, &address);
  if (!restart.ok()) return failed(restart.status());
  Row("restart-to-serving after SIGKILL", absl::StrFormat("%.2f s", *restart));
  Row("server VmRSS / VmHWM after restart", Memory(ReadProcessMemory(server->pid())));
  qpb::GetQueueStatsResponse stats;
  if (grpc::Status s = Stats(address, &stats); !s.ok()) {
    return failed(absl::UnavailableError(absl::StrCat("stats: ", s.error_message())));
  }
  Row("depth after restart (ready + delayed + leased)",
      absl::StrFormat("%lld (%lld enqueued - %lld acked)",
                      static_cast<long long>(stats.ready() + stats.delayed() + stats.leased()),
                      static_cast<long long>(jobs), static_cast<long long>(acked)));
  Stop(*server, SIGTERM);
  return 0;
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    std::signal(signal, conduit::bench::KillServerOnSignal);
  }
  return conduit::bench::Run();
}
