#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc/dial.h"
#include "conduit/queue/v1/queue.grpc.pb.h"

namespace conduit::client {

struct WorkerOptions {
  std::string address;
  std::string queue;
  std::string worker_id;
  int concurrency = 1;  // jobs handled at once, one thread each
  // Jobs each thread leases per request (1..1000) and handles one after another. Above 1 its
  // acks are sent together (AckBatch) when the batch is done, or when a handler returns at
  // least `ack_linger` after the oldest unsent ack: fewer round trips per job, at the price of
  // holding the batch's later jobs while earlier ones run and of acks that wait for the next
  // handler to return (leases stay extended all the while). A failed AckBatch is not retried:
  // its jobs are redelivered when their leases expire, as after a failed Ack.
  int max_jobs_per_lease = 1;
  absl::Duration ack_linger = absl::Milliseconds(100);
  // Lease length asked per job (0: the queue's; at least 1 s). The lease is extended by this
  // much every third of it until the job is acked or nacked.
  absl::Duration visibility_timeout = absl::Seconds(30);
  absl::Duration lease_wait = absl::Seconds(2);  // long-poll per Lease call
  absl::Duration request_timeout = absl::Seconds(10);
  // How to reach the servers: TLS, a client certificate, a bearer token
  // (grpc_util::DialSecurity); unset: the process default (grpc_util::SetDefaultDialSecurity).
  std::optional<grpc_util::DialSecurity> security;
};

struct Job {
  uint64_t id = 0;
  std::string payload;
  std::vector<std::pair<std::string, std::string>> headers;
  uint32_t attempt = 0;
  std::string tenant;
};

// What the handler decided.
struct Outcome {
  enum class Kind { kAck, kRetry, kDeadLetter } kind = Kind::kAck;
  std::string reason;
  std::optional<absl::Duration> retry_after;

  static Outcome Ack() { return {}; }
  static Outcome Retry(std::string reason, std::optional<absl::Duration> after = std::nullopt) {
    return {Kind::kRetry, std::move(reason), after};
  }
  static Outcome DeadLetter(std::string reason) { return {Kind::kDeadLetter, std::move(reason)}; }
};

// A work-queue worker: `concurrency` threads each lease up to `max_jobs_per_lease` jobs at a time
// and run the handler on each; until a job is settled, a keeper thread extends its lease; then
// the job is acked or nacked (transient: the queue's backoff or retry_after; permanent: the
// dead-letter lane). Stop() is graceful: no new leases, the jobs already leased are handled and
// their outcomes reported. Thread-safe.
class Worker {
 public:
  using Handler = std::function<Outcome(const Job&)>;

  Worker(WorkerOptions options, Handler handler);
  ~Worker();  // Stop()

  void Start();
  void Stop();

  // Counters for the application (and tests).
  struct Stats {
    int64_t leased = 0, acked = 0, retried = 0, dead = 0, extensions = 0, lost_leases = 0;
  };
  Stats stats();
  // Why a lease loop stopped on its own (an unknown queue, a bad option), or OK.
  absl::Status error();

 private:
  struct Running {  // one delivery, keyed by its lease token (unique per delivery)
    uint64_t job_id = 0;
    absl::Duration lease;  // the length the server granted: each extension asks for it again
    absl::Time next_extension;
  };
  struct PendingAck {
    uint64_t job_id = 0;
    std::string token;
  };
  void WorkLoop();
  // One long-polling Lease call.
  grpc::Status LeaseOnce(conduit::queue::v1::LeaseResponse* resp);
  // Starts keeping the leases of a leased batch alive.
  void KeepAlive(const conduit::queue::v1::LeaseResponse& resp);
  // Runs the handler on one job; queues its ack (flushed once `ack_linger` old) or nacks it.
  void Handle(conduit::queue::v1::LeasedJob& leased, std::vector<PendingAck>* acks,
              absl::Time* oldest_ack);
  void KeeperLoop();
  // Sends `acks` (one Ack, or one AckBatch) and stops extending their leases; clears `acks`.
  void FlushAcks(std::vector<PendingAck>& acks);
  void Nack(const conduit::queue::v1::LeasedJob& job, const Outcome& outcome);

  const WorkerOptions options_;
  const Handler handler_;
  std::unique_ptr<conduit::queue::v1::WorkQueue::Stub> stub_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;         // no new leases
  bool keeper_stopping_ ABSL_GUARDED_BY(mu_) = false;  // set once every handler has finished
  std::map<std::string, Running> running_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  std::thread keeper_;
};

}  // namespace conduit::client
