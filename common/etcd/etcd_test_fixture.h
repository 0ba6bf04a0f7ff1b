#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/etcd/etcd_client.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"

// The etcd client tests' shared parts: a fixture with its own etcd and a Client on it, and a
// recorder of what a watch delivers.

#define ETCD_CONCAT_INNER_(a, b) a##b
#define ETCD_CONCAT_(a, b) ETCD_CONCAT_INNER_(a, b)
#define ASSERT_OK(expr)                   \
  do {                                    \
    const absl::Status status_ = (expr);  \
    ASSERT_TRUE(status_.ok()) << status_; \
  } while (0)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL_(ETCD_CONCAT_(statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  ASSERT_TRUE(statusor.ok()) << statusor.status();      \
  lhs = std::move(statusor).value()

namespace conduit::etcd {

// Every test gets a fresh etcd in its own temp dir, and a Client with a 2 s request timeout.
class EtcdTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(2);

  void SetUp() override {
    ASSERT_OK(etcd_.Start());
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect({etcd_.endpoint()}, Options());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  static ClientOptions Options() {
    ClientOptions options;
    options.request_timeout = kRequestTimeout;
    return options;
  }

  // Calls Get until it succeeds (an etcd that was restarted), up to 10 s.
  absl::StatusOr<RangeResult> GetOnceReachable(const std::string& key) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::StatusOr<RangeResult> result = client_->Get(key);
    while (!result.ok() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));  // waiting for gRPC to reconnect
      result = client_->Get(key);
    }
    return result;
  }

  testing::TempDir dir_;
  testing::EtcdProcess etcd_{dir_.path()};
  std::unique_ptr<Client> client_;
};

// Collects what a watch delivers, for a test thread to wait on.
class WatchRecorder {
 public:
  WatchHandlers Handlers() {
    return {
        [this](std::vector<WatchEvent> events, int64_t revision) {
          absl::MutexLock lock(&mu_);
          for (WatchEvent& event : events) events_.push_back(std::move(event));
          batch_revisions_.push_back(revision);
        },
        [this](int64_t compact_revision) {
          absl::MutexLock lock(&mu_);
          compacted_ = compact_revision;
        },
        [this](absl::Status status) {
          absl::MutexLock lock(&mu_);
          ended_ = std::move(status);
        },
    };
  }

  // Waits up to 10 s for at least `n` events; returns whether they came.
  bool AwaitEvents(size_t n) {
    absl::MutexLock lock(&mu_);
    return AwaitUpTo10s([this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return events_.size() >= n;
    });
  }
  std::optional<int64_t> AwaitCompacted() {
    absl::MutexLock lock(&mu_);
    AwaitUpTo10s([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return compacted_.has_value(); });
    return compacted_;
  }
  std::optional<absl::Status> AwaitEnded() {
    absl::MutexLock lock(&mu_);
    AwaitUpTo10s([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended_.has_value(); });
    return ended_;
  }

  std::vector<WatchEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<int64_t> batch_revisions() {
    absl::MutexLock lock(&mu_);
    return batch_revisions_;
  }
  std::optional<int64_t> compacted() {
    absl::MutexLock lock(&mu_);
    return compacted_;
  }
  std::optional<absl::Status> ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  // Waits until `done()` holds or 10 s have passed on the steady clock; returns done(). absl's
  // timed waits end at a wall-clock deadline, which a step of the VM's clock brings forward.
  template <typename Done>
  bool AwaitUpTo10s(Done done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= left.zero()) return false;
      mu_.AwaitWithTimeout(absl::Condition(&done), absl::FromChrono(left));
    }
    return true;
  }

  absl::Mutex mu_;
  std::vector<WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> batch_revisions_ ABSL_GUARDED_BY(mu_);
  std::optional<int64_t> compacted_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::etcd
