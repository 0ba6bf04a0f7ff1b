#include "services/work_queue/bridge/bridge_runner.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/backoff/backoff.h"
#include "common/grpc/dial.h"
#include "common/logging/logging.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"

namespace conduit::work_queue::bridge {
namespace {

namespace cpb = ::conduit::coordinator::v1;

constexpr absl::Duration kPollWait = absl::Milliseconds(200);
// Waits after a failure: 100 ms doubling up to 5 s.
constexpr backoff::Policy kRetry{absl::Milliseconds(100), 2, absl::Seconds(5)};
constexpr absl::Duration kLagEvery = absl::Seconds(5);
constexpr int kMaxPollRecords = 1000;

// Fault injection for the crash test: CONDUIT_BRIDGE_KILL_AFTER_ENQUEUE=N makes the process
// SIGKILL itself after its Nth durable enqueue, before that batch's commit: the one moment
// where a crash must neither duplicate (the idempotency keys) nor skip (nothing committed).
void MaybeKillAfterEnqueue() {
  static const int after = [] {
    const char* v = std::getenv("CONDUIT_BRIDGE_KILL_AFTER_ENQUEUE");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  static std::atomic<int> enqueues{0};
  if (after > 0 && ++enqueues == after) ::kill(::getpid(), SIGKILL);
}

BridgedRecord FromConsumed(client::ConsumedRecord r) {
  BridgedRecord out;
  out.topic = std::move(r.topic);
  out.partition = r.partition;
  out.offset = r.offset;
  out.key = std::move(r.key);
  out.value = std::move(r.value);
  out.headers = std::move(r.headers);
  out.event_id = std::move(r.event_id);
  return out;
}

}  // namespace

absl::StatusOr<BridgeLag> AskLag(const std::string& coordinator, const BridgeSpec& spec) {
  auto stub = cpb::GroupCoordinator::NewStub(grpc_util::Dial(coordinator));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  cpb::DescribeGroupRequest request;
  request.set_group_id(spec.group);
  cpb::DescribeGroupResponse response;
  const grpc::Status s = stub->DescribeGroup(&ctx, request, &response);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("coordinator at ", coordinator, ": ", s.error_message()));
  }
  if (!response.broker_error().empty()) return absl::UnavailableError(response.broker_error());
  BridgeLag lag;
  for (const cpb::PartitionLag& p : response.partitions()) {
    if (p.topic() != spec.topic) continue;
    lag.records += p.lag_records();
    lag.seconds = std::max(lag.seconds, p.lag_seconds());
  }
  return lag;
}

BridgeRunner::BridgeRunner(BridgeSpec spec, WorkQueue* queue, BridgeEndpoints endpoints,
                           BridgeObserver* observer, const time::Clock* clock)
    : spec_(std::move(spec)),
      queue_(queue),
      endpoints_(std::move(endpoints)),
      observer_(observer),
      clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

BridgeRunner::~BridgeRunner() { Stop(); }

void BridgeRunner::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    stopped_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

BridgeStatus BridgeRunner::Status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void BridgeRunner::SetState(BridgeRunState state) {
  absl::MutexLock lock(&mu_);
  status_.state = state;
}

void BridgeRunner::Fail(BridgeRunState state, const std::string& error) {
  {
    absl::MutexLock lock(&mu_);
    if (status_.last_error != error) {
      spdlog::warn("bridge {}: {}", spec_.name, error);
    }
    status_.state = state;
    status_.last_error = error;
    status_.last_error_time = clock_->Now();
  }
  if (state == BridgeRunState::kBackingOff) observer_->OnRefused(spec_.name);
}

bool BridgeRunner::Wait(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Duration deadline = clock_->Monotonic() + d;
  while (!stopping_ && clock_->Monotonic() < deadline) clock_->WaitUntil(&stopped_, &mu_, deadline);
  return !stopping_;
}

void BridgeRunner::MaybeReportLag() {
  const absl::Duration now = clock_->Monotonic();
  if (now - lag_reported_ < kLagEvery) return;
  lag_reported_ = now;
  if (auto lag = AskLag(endpoints_.coordinator, spec_); lag.ok()) {
    observer_->OnLag(spec_.name, lag->records, lag->seconds);
  }
}

bool BridgeRunner::Connect(std::unique_ptr<client::GroupConsumer>* consumer) {
  client::ConsumerOptions options;
  options.address = endpoints_.bootstrap;
  options.coordinator_address = endpoints_.coordinator;
  options.group = spec_.group;
  options.topics = {spec_.topic};
  options.client_id = absl::StrCat("bridge.", spec_.name);
  // Static membership: a restarted server takes the partitions back at once.
  options.instance_id = absl::StrCat("bridge.", spec_.name);
  options.max_poll_records = kMaxPollRecords;
  auto created = client::GroupConsumer::Create(std::move(options));
  if (!created.ok()) {
    Fail(BridgeRunState::kFailing,
         absl::StrCat("cannot join group ", spec_.group, ": ", created.status().ToString()));
    return false;
  }
  *consumer = *std::move(created);
  return true;
}

bool BridgeRunner::EnqueueDurably(const std::vector<NewJob>& jobs) {
  // In chunks: a queue with room for fewer jobs than the batch takes a smaller chunk (halved on
  // each refusal), so a batch larger than the queue's max depth still gets through as the
  // queue drains. Only a refusal of a single job waits, with backoff.
  backoff::Sequence waits(kRetry);
  size_t chunk = jobs.size();
  for (size_t done_up_to = 0; done_up_to < jobs.size();) {
    const size_t n = std::min(chunk, jobs.size() - done_up_to);
    std::vector<NewJob> part(jobs.begin() + done_up_to, jobs.begin() + done_up_to + n);
    absl::Notification done;
    absl::Status status;
    queue_->Enqueue(spec_.queue, std::move(part), [&](absl::StatusOr<std::vector<EnqueuedJob>> r) {
      status = r.status();
      done.Notify();
    });
    done.WaitForNotification();
    if (status.ok()) {
      done_up_to += n;
      waits.Reset();
      continue;
    }
    const bool refused = absl::IsResourceExhausted(status) || absl::IsUnavailable(status);
    const JobSource& at = *jobs[done_up_to].source;
    Fail(refused ? BridgeRunState::kBackingOff : BridgeRunState::kFailing,
         absl::StrCat("queue ", spec_.queue, " refused the records from ", at.topic, "/",
                      at.partition, " at offset ", at.offset, ": ", status.ToString()));
    if (!refused) return false;  // rejoin: a ResetOffsets past the record is then seen
    if (n > 1) {
      chunk = n / 2;
      continue;
    }
    MaybeReportLag();
    if (!Wait(waits.Next())) return false;
  }
  return true;
}

void BridgeRunner::Run() {
  std::unique_ptr<client::GroupConsumer> consumer;
  backoff::Sequence waits(kRetry);
  observer_->OnRunning(spec_.name, true);
  while (Wait(absl::ZeroDuration())) {
    MaybeReportLag();
    if (consumer == nullptr && !Connect(&consumer)) {
      if (!Wait(waits.Next())) break;
      continue;
    }
    auto records = consumer->Poll(kPollWait);
    if (!records.ok()) {
      Fail(BridgeRunState::kFailing,
           absl::StrCat("reading ", spec_.topic, ": ", records.status().ToString()));
      if (!Wait(waits.Next())) break;
      continue;
    }
    if (records->empty()) continue;
    std::map<client::TopicPartition, int64_t> next;
    std::vector<NewJob> jobs;
    int64_t filtered = 0;
    for (client::ConsumedRecord& r : *records) {
      next[{r.topic, r.partition}] = r.offset + 1;
      BridgedRecord record = FromConsumed(std::move(r));
      if (BridgeAccepts(spec_, record)) {
        jobs.push_back(BridgeJob(spec_, std::move(record)));
      } else {
        ++filtered;
      }
    }
    if (!jobs.empty() && !EnqueueDurably(jobs)) {
      consumer->Close();  // the uncommitted batch is read again by whoever owns it next
      consumer.reset();
      if (!Wait(waits.Next())) break;
      continue;
    }
    // Only now, with the jobs durable: a crash before this line re-reads them, and their
    // idempotency keys answer duplicate.
    if (!jobs.empty()) MaybeKillAfterEnqueue();
    if (absl::Status s = consumer->Commit(next); !s.ok()) {
      Fail(BridgeRunState::kFailing,
           absl::StrCat("commit for group ", spec_.group, ": ", s.ToString()));
    } else {
      SetState(BridgeRunState::kRunning);
      waits.Reset();
    }
    {
      absl::MutexLock lock(&mu_);
      status_.bridged += static_cast<int64_t>(jobs.size());
      status_.filtered += filtered;
    }
    observer_->OnBridged(spec_.name, static_cast<int64_t>(jobs.size()), filtered);
  }
  if (consumer != nullptr) consumer->Close();
  observer_->OnRunning(spec_.name, false);
}

}  // namespace conduit::work_queue::bridge
