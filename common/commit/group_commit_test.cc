#include "common/commit/group_commit.h"

#include <pthread.h>

#include <atomic>
#include <set>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/time/clock.h"

namespace conduit::commit {
namespace {

// An entry: a name, and where its outcome goes.
struct Entry {
  std::string name;
  absl::Status* outcome = nullptr;
  absl::Notification* done = nullptr;
};

// The storage side of the test: records each batch, can hold the writer at a gate, and answers
// each write with `next` (then OK once `next` is used up).
class FakeStorage {
 public:
  absl::Status Write(std::vector<Entry>& batch) {
    absl::MutexLock lock(&mu_);
    ++entered_;
    mu_.Await(absl::Condition(&open_));
    std::vector<std::string> names;
    for (const Entry& e : batch) names.push_back(e.name);
    batches_.push_back(names);
    if (results_.empty()) return absl::OkStatus();
    absl::Status s = results_.front();
    results_.erase(results_.begin());
    return s;
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void Answer(std::vector<absl::Status> results) {
    absl::MutexLock lock(&mu_);
    results_ = std::move(results);
  }
  std::vector<std::vector<std::string>> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  // Waits until `n` writes have reached the gate.
  void WaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  int writes() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(batches_.size());
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> batches_ ABSL_GUARDED_BY(mu_);
};

struct Outcome {
  absl::Status status;
  absl::Notification done;
};

class GroupCommitTest : public ::testing::Test {
 protected:
  // `durably`: write through WriteDurably (the coordinator's and queue's way) instead of
  // returning the store's answer (the broker's).
  void Make(GroupCommitOptions options, bool durably) {
    options.service = "test";
    engine_ = std::make_unique<GroupCommit<Entry>>(
        options, &clock_,
        [this, durably](std::vector<Entry>& batch) {
          if (!durably) return storage_.Write(batch);
          return engine_->WriteDurably([&] { return storage_.Write(batch); });
        },
        [](Entry& e, const absl::Status& outcome) {
          *e.outcome = outcome;
          e.done->Notify();
        });
  }
  absl::Status Submit(const std::string& name, Outcome* out, int64_t bytes = 1,
                      Admission admission = Admission::kBounded) {
    return engine_->Submit(Entry{name, &out->status, &out->done}, bytes, admission);
  }

  time::FakeClock clock_;
  FakeStorage storage_;
  std::unique_ptr<GroupCommit<Entry>> engine_;  // last: stops before the storage goes
};

TEST_F(GroupCommitTest, BatchesWhatQueuedWhileWritingInOrderUpToTheByteCap) {
  Make({.max_batch_bytes = 10}, /*durably=*/false);
  storage_.Close();
  Outcome first, a, b, c;
  ASSERT_TRUE(Submit("first", &first).ok());
  storage_.WaitEntered(1);  // the writer holds "first" at the gate; the rest queue behind it
  ASSERT_TRUE(Submit("a", &a, 6).ok());
  ASSERT_TRUE(Submit("b", &b, 4).ok());
  ASSERT_TRUE(Submit("c", &c, 1).ok());
  storage_.Open();
  for (Outcome* o : {&first, &a, &b, &c}) {
    o->done.WaitForNotification();
    EXPECT_TRUE(o->status.ok()) << o->status;
  }
  // In order; a, b and c queued together, but a batch holds at most 10 bytes.
  EXPECT_EQ(storage_.batches(),
            (std::vector<std::vector<std::string>>{{"first"}, {"a", "b"}, {"c"}}));
}

TEST_F(GroupCommitTest, RefusesBoundedSubmissionsBeyondTheQueueCapButNotUnboundedOnes) {
  Make({.max_queued_bytes = 100}, /*durably=*/false);
  storage_.Close();
  Outcome held, big, over, always;
  ASSERT_TRUE(Submit("held", &held, 1).ok());
  storage_.WaitEntered(1);
  ASSERT_TRUE(Submit("big", &big, 100).ok());  // the first queued entry is never refused
  absl::Status s = Submit("over", &over, 1);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(Submit("always", &always, 1, Admission::kAlways).ok());
  storage_.Open();
  always.done.WaitForNotification();
  EXPECT_TRUE(always.status.ok());
  EXPECT_FALSE(over.done.HasBeenNotified());
}

TEST_F(GroupCommitTest, AStorageFailureIsStickyAndNeverAnsweredAsSuccess) {
  Make({}, /*durably=*/false);
  storage_.Answer({absl::InternalError("io error")});
  Outcome a, b;
  ASSERT_TRUE(Submit("a", &a).ok());
  a.done.WaitForNotification();
  EXPECT_TRUE(absl::IsUnavailable(a.status)) << a.status;
  EXPECT_TRUE(absl::IsUnavailable(engine_->health()));
  EXPECT_TRUE(absl::IsUnavailable(engine_->failure()));
  EXPECT_TRUE(absl::IsUnavailable(Submit("b", &b)));
  EXPECT_EQ(storage_.writes(), 1);
}

TEST_F(GroupCommitTest, AWriteRefusedForSpaceIsAnsweredWithItAndIsNotSticky) {
  Make({}, /*durably=*/false);
  storage_.Answer({absl::ResourceExhaustedError("disk full: test")});
  Outcome a, b;
  ASSERT_TRUE(Submit("a", &a).ok());
  a.done.WaitForNotification();
  EXPECT_TRUE(IsDiskFull(a.status)) << a.status;
  EXPECT_TRUE(engine_->failure().ok());
  ASSERT_TRUE(Submit("b", &b).ok());
  b.done.WaitForNotification();
  EXPECT_TRUE(b.status.ok()) << b.status;
}

// The coordinator's and the queue's way: memory is ahead of the disk, so a write refused for
// space is held and tried again on the clock, and nothing is answered until it is written.
TEST_F(GroupCommitTest, WriteDurablyHoldsABatchWhileTheDiskIsFullAndRefusesNewChanges) {
  Make({.disk_full_retry = absl::Seconds(1)}, /*durably=*/true);
  storage_.Answer({absl::ResourceExhaustedError("disk full: test"),
                   absl::ResourceExhaustedError("disk full: test")});
  Outcome held, refused;
  ASSERT_TRUE(Submit("held", &held).ok());
  while (engine_->health().ok()) absl::SleepFor(absl::Milliseconds(1));  // the first try failed
  EXPECT_TRUE(IsDiskFull(engine_->health())) << engine_->health();
  EXPECT_TRUE(engine_->failure().ok());
  EXPECT_TRUE(IsDiskFull(Submit("refused", &refused)));
  EXPECT_FALSE(held.done.HasBeenNotified());

  clock_.Advance(absl::Seconds(1));  // the second try: still full
  storage_.WaitEntered(2);
  EXPECT_FALSE(held.done.HasBeenNotified());
  // The third try is written (the clock is moved until the writer has waited its period again).
  while (!held.done.HasBeenNotified()) {
    clock_.Advance(absl::Seconds(1));
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_TRUE(held.status.ok()) << held.status;
  EXPECT_TRUE(engine_->health().ok());
  EXPECT_EQ(storage_.batches(),
            (std::vector<std::vector<std::string>>{{"held"}, {"held"}, {"held"}}))
      << "the same batch, tried three times";
}

TEST_F(GroupCommitTest, StoppingWhileABatchIsHeldAnswersItUnavailable) {
  Make({.disk_full_retry = absl::Hours(1)}, /*durably=*/true);
  storage_.Answer({absl::ResourceExhaustedError("disk full: test")});
  Outcome held;
  ASSERT_TRUE(Submit("held", &held).ok());
  while (engine_->health().ok()) absl::SleepFor(absl::Milliseconds(1));
  engine_.reset();
  ASSERT_TRUE(held.done.HasBeenNotified());
  EXPECT_TRUE(absl::IsUnavailable(held.status)) << held.status;
  EXPECT_NE(held.status.message().find("not written"), std::string::npos) << held.status;
}

TEST_F(GroupCommitTest, TheSpaceCheckRefusesBeforeAnythingIsQueued) {
  absl::Status space = absl::ResourceExhaustedError("disk full: low");
  Make({.space_check = [&space] { return space; }}, /*durably=*/false);
  Outcome a, b;
  EXPECT_TRUE(IsDiskFull(Submit("a", &a)));
  EXPECT_TRUE(IsDiskFull(engine_->health()));
  space = absl::OkStatus();
  EXPECT_TRUE(engine_->health().ok());
  ASSERT_TRUE(Submit("b", &b).ok());
  b.done.WaitForNotification();
  EXPECT_EQ(storage_.batches(), (std::vector<std::vector<std::string>>{{"b"}}));
}

// The name of the calling thread, as top -H and perf show it.
std::string ThisThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// Where an engine completes its entries: the thread each ran on, in completion order.
struct Completions {
  absl::Mutex mu;
  std::vector<std::pair<int, std::string>> done ABSL_GUARDED_BY(mu);  // (entry, thread)
  int running ABSL_GUARDED_BY(mu) = 0;
  bool overlapped ABSL_GUARDED_BY(mu) = false;  // two completions ran at once

  void Record(int entry) {
    {
      absl::MutexLock lock(&mu);
      overlapped |= ++running > 1;
    }
    const std::string thread = ThisThreadName();
    absl::MutexLock lock(&mu);
    --running;
    done.emplace_back(entry, thread);
  }
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done.size() >= n; };
    mu.Await(absl::Condition(&reached));
  }
};

// A write that lasts until the test has queued the next entry behind it (QueueBehind), so that
// the batch it writes is completed by the completion thread, deterministically.
struct HeldWrite {
  explicit HeldWrite(int entry) : entry(entry) {}
  // Called from the engine's write: holds the batch that starts with `entry`.
  void During(const std::vector<int>& batch) {
    if (batch.front() != entry) return;
    writing.Notify();
    released.WaitForNotification();
  }
  // Submits `next` while `entry` is being written, then lets the write finish.
  void QueueBehind(GroupCommit<int>& engine, int next) {
    writing.WaitForNotification();
    const bool queued = engine.Submit(next, 1).ok();
    released.Notify();  // also on failure: the engine's destructor waits for the write
    ASSERT_TRUE(queued);
  }
  const int entry;
  absl::Notification writing, released;
};

TEST(GroupCommitThreads, AreNamedAfterTheServiceCutToFifteenCharacters) {
  time::FakeClock clock;
  for (const auto& [service, write_name, reply_name] :
       {std::tuple<std::string, std::string, std::string>{"queue", "queue-write", "queue-reply"},
        {"coordinator", "coordinator-wri", "coordinator-rep"}}) {
    std::string written_on;
    HeldWrite one(1);
    Completions completions;
    {
      GroupCommit<int> engine(
          {.service = service}, &clock,
          [&](std::vector<int>& batch) {
            written_on = ThisThreadName();
            one.During(batch);
            return absl::OkStatus();
          },
          [&](int& entry, const absl::Status&) { completions.Record(entry); });
      ASSERT_TRUE(engine.Submit(1, 1).ok());
      // 2 waits behind 1's write, so 1 is completed by the completion thread.
      one.QueueBehind(engine, 2);
      completions.WaitFor(2);
    }
    EXPECT_EQ(written_on, write_name);
    absl::MutexLock lock(&completions.mu);
    EXPECT_EQ(completions.done.at(0), std::make_pair(1, reply_name));
  }
}

TEST(GroupCommitThreads, AnIdleEngineCompletesOnItsWriterAndOneWithAWriteQueuedOnItsReplyThread) {
  time::FakeClock clock;
  HeldWrite two(2);
  Completions completions;
  GroupCommit<int> engine(
      {.service = "queue"}, &clock,
      [&](std::vector<int>& batch) {
        two.During(batch);
        return absl::OkStatus();
      },
      [&](int& entry, const absl::Status&) { completions.Record(entry); });
  // Nothing queued behind it, nothing being completed: the writer answers, with no hand-off.
  ASSERT_TRUE(engine.Submit(1, 1).ok());
  completions.WaitFor(1);
  // 3 is queued while 2 is written: 2 goes to the completion thread, so that its answers do not
  // hold up the write of 3.
  ASSERT_TRUE(engine.Submit(2, 1).ok());
  two.QueueBehind(engine, 3);
  completions.WaitFor(3);
  absl::MutexLock lock(&completions.mu);
  ASSERT_EQ(completions.done.size(), 3u);
  EXPECT_EQ(completions.done[0], std::make_pair(1, std::string("queue-write")));
  EXPECT_EQ(completions.done[1], std::make_pair(2, std::string("queue-reply")));
}

TEST(GroupCommitThreads, CompletesEveryEntryOnceInSubmissionOrderOneAtATime) {
  time::FakeClock clock;
  Completions completions;
  constexpr int kEntries = 2000;
  std::atomic<int> submitted{0};
  std::atomic<bool> pausing{false};  // the submitter waits for every answer: no write waits
  {
    GroupCommit<int> engine(
        {.service = "queue"}, &clock,
        [&](std::vector<int>& batch) {
          // Every so often a write lasts until the next entry is queued behind it, so that its
          // batch goes to the completion thread while the writer goes on.
          if (batch.front() % 50 == 0 && batch.back() + 1 < kEntries) {
            const absl::Time until = absl::Now() + absl::Seconds(5);
            while (submitted.load() < batch.back() + 2 && !pausing.load() && absl::Now() < until) {
              absl::SleepFor(absl::Microseconds(20));
            }
          }
          return absl::OkStatus();
        },
        [&](int& entry, const absl::Status&) { completions.Record(entry); });
    for (int i = 0; i < kEntries; ++i) {
      ASSERT_TRUE(engine.Submit(i, 1).ok());
      submitted.store(i + 1);
      if (i % 3 == 0) absl::SleepFor(absl::Microseconds(50));
      if (i % 500 == 250) {
        // All answered and the engine idle: the next batch is completed by the writer.
        pausing.store(true);
        completions.WaitFor(i + 1);
        absl::SleepFor(absl::Milliseconds(20));
        pausing.store(false);
      }
    }
  }  // the destructor completes everything
  absl::MutexLock lock(&completions.mu);
  ASSERT_EQ(completions.done.size(), static_cast<size_t>(kEntries));
  std::set<std::string> threads;
  for (int i = 0; i < kEntries; ++i) {
    ASSERT_EQ(completions.done[i].first, i);
    threads.insert(completions.done[i].second);
  }
  EXPECT_FALSE(completions.overlapped);
  EXPECT_EQ(threads, (std::set<std::string>{"queue-write", "queue-reply"}));
}

}  // namespace
}  // namespace conduit::commit
