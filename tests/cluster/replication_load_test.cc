// The leader SIGKILLed under acks-all load from several idempotent Producers
// (client/producer.h), on etcd and three conduit-broker processes, topic "t" with 2 partitions,
// RF 3, min in-sync 2, 2 s leases. Checked: a new leader serves within the lease TTL + 2 s; every
// acknowledged record is in the log exactly once, at its acknowledged offset; the survivors'
// copies, read back from their data dirs, are identical up to the high watermark, and so is the
// killed broker's once it has restarted and caught up.

#include <signal.h>

#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "client/producer.h"
#include "tests/cluster/replication_fixture.h"

namespace conduit::testing {
namespace {

constexpr int kPartitions = 2;
constexpr int kProducers = 3;
// Records one producer has sent and not yet had answered: keeps every producer sending all the
// time without queueing more than the cluster takes.
constexpr int kMaxUnanswered = 64;

// One thread sending records continuously through a client::Producer (idempotent, acks all,
// bootstrap = every broker), alternating the partitions. Each value is unique ("p<id>-<n>").
// After a failed record (an idempotent producer stops after an unclear failure: producer.h) it
// goes on with a new Producer, as the API says. Only acknowledged records are kept.
class LoadProducer {
 public:
  struct Ack {
    int32_t partition;
    int64_t offset;
    std::string value;
    bool sent_after_failover;  // sent once the test had seen the new leader serve
  };

  LoadProducer(int id, std::vector<std::string> bootstrap)
      : id_(id),
        bootstrap_(std::move(bootstrap)),
        thread_([this](std::stop_token stop) { Run(stop); }) {}

  // Stops sending and waits for an answer to everything sent.
  void Stop() {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  void MarkFailover() { failover_.store(true); }

  std::vector<Ack> acks() const {
    absl::MutexLock lock(&mu_);
    return acks_;
  }
  // Acknowledged records sent after MarkFailover, per partition.
  int64_t AckedAfterFailover(int32_t partition) const {
    absl::MutexLock lock(&mu_);
    return after_[partition];
  }
  int64_t acked() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(acks_.size());
  }
  int64_t failed() const {
    absl::MutexLock lock(&mu_);
    return failed_;
  }
  int64_t duplicates() const {
    absl::MutexLock lock(&mu_);
    return duplicates_;
  }
  int producers_created() const {
    absl::MutexLock lock(&mu_);
    return created_;
  }
  std::string last_error() const {
    absl::MutexLock lock(&mu_);
    return last_error_.ToString();
  }

 private:
  void Run(std::stop_token stop) {
    std::unique_ptr<client::Producer> producer;
    for (int64_t n = 0; !stop.stop_requested();) {
      bool replace;
      {
        absl::MutexLock lock(&mu_);
        replace = replace_;
        replace_ = false;
      }
      if (producer == nullptr || replace) {
        producer.reset();  // flushes: every record sent so far has its answer
        auto created = client::Producer::Create({.bootstrap = bootstrap_,
                                                 .topic = "t",
                                                 .idempotent = true,
                                                 .acks = logpb::ACKS_ALL});
        if (!created.ok()) {
          absl::SleepFor(absl::Milliseconds(100));  // no broker answered: the cluster moves
          continue;
        }
        producer = *std::move(created);
        absl::MutexLock lock(&mu_);
        ++created_;
      }
      {
        absl::MutexLock lock(&mu_);
        auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return unanswered_ < kMaxUnanswered || replace_;
        };
        if (!mu_.AwaitWithTimeout(absl::Condition(&room), absl::Milliseconds(100)) || replace_) {
          continue;
        }
        ++unanswered_;
      }
      const int32_t partition = static_cast<int32_t>(n % kPartitions);
      std::string value = absl::StrCat("p", id_, "-", n++);
      const bool after = failover_.load();
      producer->Send({.value = value, .partition = partition},
                     [this, value, after](absl::StatusOr<client::RecordPosition> result) {
                       absl::MutexLock lock(&mu_);
                       --unanswered_;
                       if (result.ok()) {
                         acks_.push_back({result->partition, result->offset, value, after});
                         if (result->duplicate) ++duplicates_;
                         if (after) ++after_[result->partition];
                       } else {
                         ++failed_;
                         last_error_ = result.status();
                         replace_ = true;
                       }
                     });
    }
    producer.reset();
  }

  const int id_;
  const std::vector<std::string> bootstrap_;
  std::atomic<bool> failover_{false};
  mutable absl::Mutex mu_;
  std::vector<Ack> acks_ ABSL_GUARDED_BY(mu_);
  int64_t after_[kPartitions] ABSL_GUARDED_BY(mu_) = {};
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;  // acknowledged as a retry already appended
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  int created_ ABSL_GUARDED_BY(mu_) = 0;
  int unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  bool replace_ ABSL_GUARDED_BY(mu_) = false;  // a record failed: go on with a new Producer
  std::jthread thread_;  // last: starts after every other member is constructed
};

TEST_F(ReplicationTest, LeaderKilledUnderLoadKeepsEveryAckOnceAndReplicasIdentical) {
  StartReplicatedCluster(kPartitions);
  for (int32_t p = 0; p < kPartitions; ++p) {
    ASSERT_TRUE(Eventually([&] { return State(1, p).isr_size() == 3; })) << p;
  }
  const std::vector<std::string> bootstrap = {address(1), address(2), address(3)};
  std::vector<std::unique_ptr<LoadProducer>> producers;
  for (int i = 0; i < kProducers; ++i) {
    producers.push_back(std::make_unique<LoadProducer>(i, bootstrap));
  }
  ASSERT_TRUE(Eventually([&] {
    for (const auto& p : producers) {
      if (p->acked() < 200) return false;
    }
    return true;
  })) << "every producer has records acknowledged before the kill";

  // Kill the leader of partition 0 mid-load (it may lead partition 1 too).
  const int32_t victim = Leader(1, 0);
  ASSERT_NE(victim, -1);
  std::vector<int32_t> led;  // the partitions it led
  for (int32_t p = 0; p < kPartitions; ++p) {
    if (Leader(1, p) == victim) led.push_back(p);
  }
  const int32_t other = victim % 3 + 1, third = other % 3 + 1;
  int64_t acked_before = 0;
  for (const auto& p : producers) acked_before += p->acked();
  broker(victim).Kill(SIGKILL);
  const absl::Time killed = absl::Now();
  std::map<int32_t, int32_t> next;  // partition → its new leader
  ASSERT_TRUE(Eventually(
      [&] {
        for (int32_t p : led) {
          const int32_t l = Leader(other, p);
          logpb::FetchResponse ignored;
          if (l == -1 || l == victim || !client(l).Fetch("t", p, 0, &ignored, 1).ok()) {
            return false;
          }
          next[p] = l;
        }
        return true;
      },
      kLeaseTtl + absl::Seconds(5)))
      << "a new leader serves";
  const absl::Duration failover = absl::Now() - killed;
  EXPECT_LT(failover, kLeaseTtl + absl::Seconds(2)) << "a new leader serves within TTL + 2 s";
  for (auto& p : producers) p->MarkFailover();
  // Producing goes on until every producer has records sent after the failover acknowledged
  // in every partition.
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& p : producers) {
          for (int32_t part = 0; part < kPartitions; ++part) {
            if (p->AckedAfterFailover(part) < 50) return false;
          }
        }
        return true;
      },
      absl::Seconds(30)))
      << "producers go on after the failover";
  for (auto& p : producers) p->Stop();

  std::map<std::pair<int32_t, int64_t>, std::string> acked;  // (partition, offset) → value
  int64_t failed = 0, created = 0, duplicates = 0;
  for (const auto& p : producers) {
    for (const auto& a : p->acks()) {
      auto [it, inserted] = acked.emplace(std::make_pair(a.partition, a.offset), a.value);
      EXPECT_TRUE(inserted) << a.partition << "/" << a.offset << " acknowledged for " << it->second
                            << " and " << a.value;
    }
    failed += p->failed();
    duplicates += p->duplicates();
    created += p->producers_created();
    if (p->failed() > 0) std::cout << "a failed record: " << p->last_error() << "\n";
  }
  std::cout << "killed broker " << victim << " (leading " << led.size() << " partition(s)) after "
            << acked_before << " acknowledged records; new leader in " << failover << "; "
            << acked.size() << " acknowledged in all, " << failed << " failed, " << duplicates
            << " answered as retries already appended, " << created << " producers for "
            << kProducers << " threads\n";

  // The survivors agree; then the killed broker returns and catches up to the same log.
  std::map<int32_t, int64_t> hw;
  for (int32_t p = 0; p < kPartitions; ++p) {
    int64_t last = -1;
    for (const auto& [at, value] : acked) {
      if (at.first == p) last = std::max(last, at.second);
    }
    ASSERT_TRUE(Eventually([&] { return Converged({other, third}, last + 1, p); }))
        << "the survivors converge on partition " << p;
    hw[p] = Described(other, p).high_watermark();
  }
  ASSERT_TRUE(StartBroker(victim, {"--replica-lag-time", kLagTime}));
  for (int32_t p = 0; p < kPartitions; ++p) {
    ASSERT_TRUE(Eventually([&] { return State(other, p).isr_size() == 3; }, absl::Seconds(30)))
        << "the killed broker rejoins the in-sync set of partition " << p;
    ASSERT_TRUE(Eventually([&] { return Converged({1, 2, 3}, hw[p], p); }));
    EXPECT_EQ(Described(victim, p).high_watermark(), hw[p]) << "nothing written since";
  }
  std::map<int32_t, RecordsChecksum> served;
  for (int32_t p = 0; p < kPartitions; ++p) {
    ASSERT_TRUE(ServedChecksum(Leader(other, p), p, &served[p]).ok());
    EXPECT_EQ(served[p].records(), hw[p]);
  }

  StopAllBrokers();
  std::map<int32_t, std::vector<log_broker::StoredRecord>> logs;  // partition → the copy read
  for (int32_t p = 0; p < kPartitions; ++p) {
    for (int32_t id = 1; id <= 3; ++id) {
      auto copy = StoredCopy(id, p, hw[p]);
      ASSERT_TRUE(copy.ok()) << "broker " << id << ": " << copy.status();
      EXPECT_EQ(copy->records.size(), static_cast<size_t>(hw[p])) << "broker " << id << ", " << p;
      EXPECT_EQ(copy->checksum, served[p].value())
          << "broker " << id << (id == victim ? " (killed, restarted)" : " (survivor)")
          << " holds the same records over [0, " << hw[p] << ") of partition " << p;
      logs[p] = std::move(copy->records);
    }
  }
  // Every acknowledged record at its offset; no value twice.
  int64_t wrong = 0;
  for (const auto& [at, value] : acked) {
    const auto& records = logs[at.first];
    const bool there = at.second < static_cast<int64_t>(records.size()) &&
                       records[at.second].offset == at.second &&
                       records[at.second].data.value == value;
    if (!there && ++wrong <= 10) {
      ADD_FAILURE() << value << " is not at " << at.first << "/" << at.second;
    }
  }
  EXPECT_EQ(wrong, 0) << "acknowledged records not at their offsets";
  std::map<std::string, int> seen;
  for (const auto& [p, records] : logs) {
    for (const auto& r : records) ++seen[r.data.value.value_or("")];
  }
  int64_t twice = 0;
  for (const auto& [value, count] : seen) {
    if (count > 1 && ++twice <= 10) ADD_FAILURE() << value << " appears " << count << " times";
  }
  EXPECT_EQ(twice, 0) << "values appended more than once";
}

}  // namespace
}  // namespace conduit::testing
