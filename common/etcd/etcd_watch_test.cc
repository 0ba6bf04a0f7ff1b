#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/etcd/etcd_client.h"
#include "common/etcd/etcd_test_fixture.h"

// Watches against a real etcd.

namespace conduit::etcd {
namespace {

using ::testing::HasSubstr;

TEST_F(EtcdTest, WatchDeliversPutsAndDeletesUnderThePrefixInOrder) {
  // History before the watch, replayed from its start revision...
  ASSERT_OK_AND_ASSIGN(const int64_t put_a, client_->Put("/w/a", "1"));
  ASSERT_OK_AND_ASSIGN(const int64_t put_b, client_->Put("/w/b", "2"));
  ASSERT_OK(client_->Put("/wx", "sibling").status());
  ASSERT_OK_AND_ASSIGN(const DeleteResult del_a, client_->Delete("/w/a"));
  WatchRecorder prefix;
  WatchRecorder key;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> prefix_watch,
                       client_->WatchPrefix("/w/", put_a, prefix.Handlers()));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> key_watch,
                       client_->WatchKey("/w/b", 0, key.Handlers()));  // from now on
  // ...then changes made after it.
  ASSERT_OK_AND_ASSIGN(const int64_t put_c, client_->Put("/w/c", "3"));
  ASSERT_OK(client_->Put("/wx", "sibling again").status());
  ASSERT_OK_AND_ASSIGN(const int64_t put_b2, client_->Put("/w/b", "4"));

  ASSERT_TRUE(prefix.AwaitEvents(5));
  const std::vector<WatchEvent> events = prefix.events();
  ASSERT_EQ(events.size(), 5u);  // nothing of /wx
  struct Expected {
    EventType type;
    std::string key;
    int64_t revision;
  };
  const Expected expected[] = {{EventType::kPut, "/w/a", put_a},
                               {EventType::kPut, "/w/b", put_b},
                               {EventType::kDelete, "/w/a", del_a.revision},
                               {EventType::kPut, "/w/c", put_c},
                               {EventType::kPut, "/w/b", put_b2}};
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(events[i].type, expected[i].type);
    EXPECT_EQ(events[i].kv.key, expected[i].key);
    EXPECT_EQ(events[i].kv.mod_revision, expected[i].revision);
  }
  EXPECT_EQ(events[4].kv.value, "4");
  EXPECT_EQ(events[4].kv.version, 2);
  EXPECT_EQ(events[4].kv.create_revision, put_b);
  EXPECT_EQ(events[2].kv.create_revision, 0);  // a delete carries the key and its revision
  const std::vector<int64_t> batches = prefix.batch_revisions();
  EXPECT_TRUE(std::is_sorted(batches.begin(), batches.end()));

  ASSERT_TRUE(key.AwaitEvents(1));
  const std::vector<WatchEvent> on_key = key.events();
  ASSERT_EQ(on_key.size(), 1u);
  EXPECT_EQ(on_key[0].kv.mod_revision, put_b2);
  EXPECT_FALSE(prefix.ended().has_value());
}

TEST_F(EtcdTest, WatchFromACompactedRevisionReportsTheCompaction) {
  ASSERT_OK_AND_ASSIGN(const int64_t first, client_->Put("/c/k", "1"));
  ASSERT_OK(client_->Put("/c/k", "2").status());
  ASSERT_OK_AND_ASSIGN(const int64_t last, client_->Put("/c/k", "3"));
  ASSERT_OK(client_->Compact(last));
  absl::Status twice = client_->Compact(last);
  EXPECT_TRUE(absl::IsOutOfRange(twice)) << twice;
  EXPECT_THAT(twice.message(), HasSubstr("compacted"));

  WatchRecorder stale;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> stale_watch,
                       client_->WatchPrefix("/c/", first, stale.Handlers()));
  EXPECT_EQ(stale.AwaitCompacted(), last);
  EXPECT_TRUE(stale.events().empty());
  EXPECT_FALSE(stale.ended().has_value());

  // What the caller does next: read again, and watch from that revision + 1.
  ASSERT_OK_AND_ASSIGN(const RangeResult now, client_->GetPrefix("/c/"));
  ASSERT_EQ(now.kvs.size(), 1u);
  EXPECT_EQ(now.kvs[0].value, "3");
  WatchRecorder fresh;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> fresh_watch,
                       client_->WatchPrefix("/c/", now.revision + 1, fresh.Handlers()));
  ASSERT_OK_AND_ASSIGN(const int64_t next, client_->Put("/c/k", "4"));
  ASSERT_TRUE(fresh.AwaitEvents(1));
  EXPECT_EQ(fresh.events()[0].kv.mod_revision, next);
  EXPECT_FALSE(fresh.compacted().has_value());
}

TEST_F(EtcdTest, CancelStopsTheCallbacks) {
  WatchRecorder cancelled;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> watch,
                       client_->WatchPrefix("/q/", 0, cancelled.Handlers()));
  ASSERT_OK(client_->Put("/q/1", "seen").status());
  ASSERT_TRUE(cancelled.AwaitEvents(1));
  watch->Cancel();
  watch->Cancel();  // idempotent

  // A second watch shows the changes after Cancel were delivered to watchers that were live.
  WatchRecorder control;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> control_watch,
                       client_->WatchPrefix("/q/", 0, control.Handlers()));
  for (int i = 2; i <= 5; ++i) ASSERT_OK(client_->Put("/q/" + std::to_string(i), "x").status());
  ASSERT_TRUE(control.AwaitEvents(4));
  EXPECT_EQ(cancelled.events().size(), 1u);
  EXPECT_FALSE(cancelled.ended().has_value());  // Cancel is not an error
  EXPECT_FALSE(cancelled.compacted().has_value());
  watch.reset();  // destroying a cancelled handle is fine
}

TEST_F(EtcdTest, WatchReportsTheStreamEndWhenEtcdDies) {
  WatchRecorder recorder;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> watch,
                       client_->WatchPrefix("/", 0, recorder.Handlers()));
  etcd_.Kill();
  const std::optional<absl::Status> ended = recorder.AwaitEnded();
  ASSERT_TRUE(ended.has_value()) << "no end reported 10 s after etcd died";
  EXPECT_TRUE(absl::IsUnavailable(*ended)) << *ended;
  EXPECT_THAT(ended->message(), HasSubstr("etcd unreachable: " + etcd_.endpoint()));

  // With etcd down a new watch fails at once, and no handler of it runs.
  WatchRecorder refused;
  absl::StatusOr<std::unique_ptr<WatchHandle>> none =
      client_->WatchPrefix("/", 0, refused.Handlers());
  EXPECT_TRUE(absl::IsUnavailable(none.status())) << none.status();
  EXPECT_FALSE(refused.ended().has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(client_->WatchKey("/k", 0, WatchHandlers{}).status()));
}

TEST_F(EtcdTest, WatchOnAPausedEtcdEndsAfterTheKeepaliveTimeout) {
  ClientOptions options = Options();
  options.keepalive_time = absl::Seconds(5);  // etcd's minimum
  options.keepalive_timeout = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client,
                       Client::Connect({etcd_.endpoint()}, options));
  WatchRecorder recorder;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<WatchHandle> watch,
                       client->WatchPrefix("/", 0, recorder.Handlers()));
  etcd_.Pause();  // the connection stays open; nothing answers on it
  const absl::Time start = absl::Now();
  const std::optional<absl::Status> ended = recorder.AwaitEnded();
  ASSERT_TRUE(ended.has_value()) << "a watch on a stopped etcd went on for "
                                 << absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(*ended)) << *ended;
  EXPECT_THAT(ended->message(), HasSubstr("etcd unreachable: "));
  EXPECT_GE(absl::Now() - start, absl::Seconds(4));  // the keepalive, not something else
  etcd_.Resume();
}

}  // namespace
}  // namespace conduit::etcd
