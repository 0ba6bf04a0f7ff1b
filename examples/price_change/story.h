#pragma once

// The price-change story's cast (examples/README.md): the database, the relay process, the
// consumer groups, the worker and the fake provider, and what an operator looks at. The stages
// themselves are in price_change.cc.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/group_consumer.h"
#include "client/windows.h"
#include "client/worker.h"
#include "common/testing/temp_dir.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "examples/price_change/fake_provider.h"
#include "examples/price_change/pipeline.h"
#include "tests/support/child_process.h"
#include "tools/outbox_relay/pg_connection.h"

namespace conduit::examples {

namespace logpb = ::conduit::log::v1;
namespace queuepb = ::conduit::queue::v1;
namespace coordpb = ::conduit::coordinator::v1;
using client::ConsumedRecord;
using outbox::PgConnection;

constexpr int kPartitions = 3;
constexpr int kProducts = 20;
constexpr double kReplayRate = 4;  // records/s for the rebuild
constexpr char kSchema[] = "price_change";

// The story's output: a line; a stage's title; a check (counted when it fails).
void Say(const std::string& line);
void Stage(int n, const std::string& title);
bool Check(bool ok, const std::string& what);
int Failures();
// Polls `ready` every 50 ms until it holds (true) or `timeout` passes (false).
bool Eventually(const std::function<bool()>& ready, absl::Duration timeout = absl::Seconds(30));
void Deadline(grpc::ClientContext* ctx);  // 10 s

// A loop on its own thread: runs `step` until it returns false or Stop().
class Loop {
 public:
  explicit Loop(std::function<bool()> step)
      : thread_([this, step = std::move(step)] {
          while (!stop_ && step()) {
          }
          done_ = true;
        }) {}
  ~Loop() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// Plays the story against one conduit server and one PostgreSQL database. Owns every thread and
// process it starts (stopped when it goes). Run() once, from one thread.
class Story {
 public:
  Story(std::string address, std::string conninfo, std::string relay)
      : address_(std::move(address)), conninfo_(std::move(conninfo)), relay_(std::move(relay)) {
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    log_ = logpb::LogService::NewStub(channel);
    queue_ = queuepb::WorkQueue::NewStub(channel);
    groups_ = coordpb::GroupCoordinator::NewStub(channel);
  }
  ~Story() {
    for (auto* loop : {&search_, &analytics_, &notifications_, &rebuild_}) loop->reset();
    if (worker_) worker_->Stop();
  }

  // Runs the stages in order; 0 when every check held.
  int Run();

 private:
  // The stages; false when the story cannot go on.
  bool SetUp();
  bool RelayCrash();
  bool SearchCrash();
  bool MoreChanges();
  bool WorkerCrash();
  bool PoisonEvent();
  bool NextWindow();
  bool LateEvent();
  bool Rebuild();
  bool EndState();

  // Setup.
  absl::Status SetUpDatabase();
  absl::Status SetUpConduit();
  std::unique_ptr<PgConnection> Db(const std::string& name);
  std::string Scalar(const std::string& sql, const std::vector<std::string>& params = {});

  // The product service: the price and its outbox row in one transaction.
  std::string ChangePrice(const std::string& product, int64_t price, const std::string& currency,
                          absl::Duration occurred);

  // The relay, a real process. Its session checks every 100 ms that it is still connected, so
  // PostgreSQL ends the session of a relay that died while waiting for a lock, instead of
  // finishing its UPDATE.
  void StartRelay() {
    relay_process_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{
            relay_, "--postgres",
            absl::StrCat(conninfo_, " options='-c client_connection_check_interval=100'"),
            "--outbox-table", absl::StrCat(kSchema, ".conduit_outbox"), "--broker", address_,
            "--topic", kTopic, "--create-topic-partitions", "0", "--metrics-port", "-1",
            "--poll-interval", "200ms", "--producer-name", "price-change-relay"},
        work_.Sub("relay.log"));
  }
  int64_t Unpublished() {
    return std::stoll(Scalar("SELECT count(*) FROM conduit_outbox WHERE published_at IS NULL"));
  }

  // The consumer groups, each on a Loop.
  client::ConsumerOptions ConsumerOptionsFor(const std::string& group);
  // A search indexer in `group` writing `table`, at most `rate` records/s (0: unlimited);
  // `crash_at`: after writing this event it stops without committing, as a process killed there
  // would. Counts in `unchanged` the writes the version guard turned away.
  std::unique_ptr<Loop> StartSearch(const std::string& group, const std::string& table,
                                    const std::string& crash_at, double rate,
                                    std::atomic<int>* unchanged);
  std::unique_ptr<Loop> StartAnalytics();
  std::unique_ptr<Loop> StartNotifications();

  // What an operator looks at.
  coordpb::DescribeGroupResponse DescribeGroup(const std::string& group);
  queuepb::GetQueueStatsResponse QueueStats();
  void PrintBacklog();
  std::vector<logpb::Record> TopicRecords();
  std::map<std::string, std::string> SearchIndex(const std::string& table);
  std::vector<client::WindowResult<int64_t>> WindowResults() {
    absl::MutexLock lock(&windows_mu_);
    return windows_;
  }

  const std::string address_, conninfo_, relay_;
  testing::TempDir work_;
  std::unique_ptr<logpb::LogService::Stub> log_;
  std::unique_ptr<queuepb::WorkQueue::Stub> queue_;
  std::unique_ptr<coordpb::GroupCoordinator::Stub> groups_;
  std::unique_ptr<PgConnection> db_;
  absl::Time t0_;  // the start of the first 5-minute window the events fall in
  FakeEmailProvider provider_;
  std::unique_ptr<testing::ChildProcess> relay_process_;
  std::unique_ptr<Loop> search_, analytics_, notifications_, rebuild_;
  std::unique_ptr<client::Worker> worker_;
  std::atomic<bool> search_crashed_{false};
  std::atomic<int> search_unchanged_{0};  // search writes the version guard turned away
  absl::Mutex windows_mu_;
  std::vector<client::WindowResult<int64_t>> windows_ ABSL_GUARDED_BY(windows_mu_);
};

}  // namespace conduit::examples
