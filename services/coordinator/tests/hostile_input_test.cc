// What a careless or hostile client must not be able to do to the coordinator: an
// oversized heartbeat, a heartbeat whose caller gave up, commits to deleted or recreated topics,
// a topic cache that only grows, memberless commits with a made-up epoch.
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/coordinator/domain/topic_cache.h"
#include "services/coordinator/domain/validation.h"
#include "services/coordinator/tests/coordinator_fixture.h"

namespace conduit::coordinator {
namespace {

class HostileInputTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    topics_.AddTopic("orders", 2);
    for (int i = 0; i < 10; ++i) {
      topics_.Append("orders", 0, clock_.Now());
      topics_.Append("orders", 1, clock_.Now());
    }
  }
  HeartbeatInput JoinOf(std::vector<std::string> topics) {
    HeartbeatInput in;
    in.group_id = "g";
    in.subscription = std::move(topics);
    in.session_timeout = absl::Seconds(10);
    return in;
  }
  absl::Status CommitMemberless(const std::string& topic, int32_t partition, int64_t offset,
                                int32_t epoch = -1) {
    CommitInput in;
    in.group_id = "manual";
    in.member_epoch = MemberEpoch(epoch);
    in.entries.push_back({{topic, partition}, offset, ""});
    return coordinator_->Commit(in);
  }
};

std::vector<std::string> Names(size_t n, size_t length = 8) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string name = absl::StrCat("x", i);
    name.resize(std::max(name.size(), length), 'x');
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(HostileInputTest, AnOversizedSubscriptionIsRefusedBeforeTheBrokerIsAsked) {
  auto by_count = coordinator_->Heartbeat(JoinOf(Names(kMaxSubscribedTopics + 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(by_count.status())) << by_count.status();
  EXPECT_NE(by_count.status().message().find("limit is 1000"), std::string::npos);
  // 300 names of 255 bytes: under the count, over the bytes.
  auto by_bytes = coordinator_->Heartbeat(JoinOf(Names(300, kMaxIdLength)));
  EXPECT_TRUE(absl::IsInvalidArgument(by_bytes.status())) << by_bytes.status();
  EXPECT_EQ(topics_.describes(), 0) << "a refused heartbeat must cost no broker question";
  EXPECT_TRUE(coordinator_->List().empty()) << "and create no group";
  // At the limit it joins.
  auto at_limit = coordinator_->Heartbeat(JoinOf(Names(kMaxSubscribedTopics)));
  EXPECT_TRUE(at_limit.ok()) << at_limit.status();
}

TEST_F(HostileInputTest, AHeartbeatWhoseDeadlinePassedWhileAskingTheBrokerChangesNothing) {
  HeartbeatInput join = JoinOf({"orders", "unknown-1", "unknown-2"});
  join.deadline = clock_.Now() + absl::Seconds(5);
  topics_.OnDescribe([this] { clock_.Advance(absl::Seconds(2)); });  // a slow broker
  auto out = coordinator_->Heartbeat(join);
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.status())) << out.status();
  topics_.OnDescribe(nullptr);
  EXPECT_TRUE(coordinator_->List().empty()) << "the member must not have joined";
  // Mutation check: with time to spare the same heartbeat joins.
  join.deadline = clock_.Now() + absl::Seconds(5);
  EXPECT_TRUE(coordinator_->Heartbeat(join).ok());
}

TEST_F(HostileInputTest, ACommitWhoseDeadlinePassedWhileAskingTheBrokerIsNotApplied) {
  CommitInput in;
  in.group_id = "manual";
  in.member_epoch = kLeavingEpoch;
  in.entries.push_back({{"orders", 0}, 3, ""});
  in.deadline = clock_.Now() + absl::Seconds(5);
  topics_.OnDescribe([this] { clock_.Advance(absl::Seconds(6)); });  // a slow broker
  EXPECT_TRUE(absl::IsDeadlineExceeded(coordinator_->Commit(in)));
  topics_.OnDescribe(nullptr);
  EXPECT_TRUE(absl::IsNotFound(coordinator_->FetchOffsets("manual", {}).status()))
      << "nothing may have been committed";
  in.deadline = clock_.Now() + absl::Seconds(5);  // mutation check: in time, it commits
  ASSERT_TRUE(coordinator_->Commit(in).ok());
  EXPECT_EQ(Committed("manual", "orders", 0), 3);
}

TEST_F(HostileInputTest, UnknownTopicsLeaveTheCacheOnceNobodySubscribes) {
  HeartbeatOutput member = Join("g", Names(500));
  ASSERT_FALSE(member.member_id.empty());
  Join("h", {"orders"});
  EXPECT_EQ(coordinator_->CachedTopics(), 501u);
  coordinator_->Sweep();
  EXPECT_EQ(coordinator_->CachedTopics(), 501u) << "subscribed topics stay";
  ASSERT_TRUE(coordinator_->Leave("g", member.member_id).ok());
  coordinator_->Sweep();
  EXPECT_EQ(coordinator_->CachedTopics(), 501u) << "younger than topic_refresh: kept a while";
  clock_.Advance(options_.topic_refresh);
  coordinator_->Sweep();
  EXPECT_EQ(coordinator_->CachedTopics(), 1u) << "only what a member subscribes to is left";
}

TEST_F(HostileInputTest, ACommitToADeletedTopicIsRefusedAtOnce) {
  ASSERT_TRUE(CommitMemberless("orders", 0, 5).ok());  // the marks are now cached
  topics_.RemoveTopic("orders");
  auto s = CommitMemberless("orders", 0, 6);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(Committed("manual", "orders", 0), 5);
}

TEST_F(HostileInputTest, ARecreatedTopicIsJudgedByItsNewMarks) {
  ASSERT_TRUE(CommitMemberless("orders", 0, 8).ok());  // high watermark 10 cached
  topics_.RemoveTopic("orders");
  topics_.AddTopic("orders", 2);  // recreated, empty
  auto s = CommitMemberless("orders", 0, 5);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_TRUE(CommitMemberless("orders", 0, 0).ok());
}

TEST_F(HostileInputTest, AMemberlessCommitTakesEpochMinusOneOrZeroOnly) {
  for (int32_t epoch : {std::numeric_limits<int32_t>::min(), -2, 1}) {
    auto s = CommitMemberless("orders", 0, 1, epoch);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << epoch << ": " << s;
  }
  EXPECT_EQ(coordinator_->FetchOffsets("manual", {}).status().code(), absl::StatusCode::kNotFound)
      << "refused commits must not create the group";
  EXPECT_TRUE(CommitMemberless("orders", 0, 1, -1).ok());
  EXPECT_TRUE(CommitMemberless("orders", 0, 2, 0).ok());
}

// A decision: as in Kafka, an executed reset may start a group
// that has never run; a dry run leaves no trace.
TEST_F(HostileInputTest, AnExecutedResetCreatesAGroupThatDoesNotExistADryRunDoesNot) {
  ResetInput in;
  in.group_id = "new-group";
  in.topic = "orders";
  in.kind = ResetInput::Kind::kLatest;
  in.actor = "alice";
  auto dry = coordinator_->ResetOffsets(in);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_TRUE(absl::IsNotFound(coordinator_->FetchOffsets("new-group", {}).status()));
  in.execute = true;
  ASSERT_TRUE(coordinator_->ResetOffsets(in).ok());
  EXPECT_EQ(Committed("new-group", "orders", 0), 10);
  EXPECT_EQ(Committed("new-group", "orders", 1), 10);
}

// A TopicCache over a fake broker whose first answer is held on its way until `release`.
class TopicCacheTest : public ::testing::Test {
 protected:
  TopicCacheTest() {
    topics.AddTopic("orders", 1);
    topics.OnDescribe([this] {
      if (!first_asked.HasBeenNotified()) {
        first_asked.Notify();
        release.WaitForNotification();
      }
    });
  }
  time::FakeClock clock;
  FakeTopics topics;
  TopicCache cache{&topics, &clock, absl::Seconds(30)};
  absl::Notification first_asked, release;
};

// Fresh questions are shared, but never with a question that started before the caller: a
// caller that arrives while one is on its way must not take its (possibly stale) answer.
TEST_F(TopicCacheTest, ACallerNeverTakesTheAnswerOfAQuestionAskedBeforeItArrived) {
  absl::StatusOr<std::vector<PartitionMarks>> first, second;
  std::thread a([&] { first = cache.Fresh("orders"); });
  first_asked.WaitForNotification();  // a's question saw the topic and is on its way
  topics.RemoveTopic("orders");
  std::thread b([&] { second = cache.Fresh("orders"); });
  // Give b time to find a's question in flight (if it took that answer, it would see "orders").
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  a.join();
  b.join();
  EXPECT_TRUE(first.ok());
  EXPECT_TRUE(absl::IsNotFound(second.status())) << "b arrived after the deletion";
  EXPECT_EQ(topics.describes(), 2);
}

TEST_F(TopicCacheTest, CallersWaitingTogetherShareOneQuestion) {
  std::vector<std::thread> threads;
  threads.emplace_back([&] { (void)cache.Fresh("orders"); });
  first_asked.WaitForNotification();
  for (int i = 0; i < 8; ++i) threads.emplace_back([&] { (void)cache.Fresh("orders"); });
  absl::SleepFor(absl::Milliseconds(50));  // the 8 gather behind the first question
  release.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(topics.describes(), 2) << "one question for the first caller, one for the 8";
}

}  // namespace
}  // namespace conduit::coordinator
