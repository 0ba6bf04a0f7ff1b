// The outbox relay SIGKILLed at random points while rows are inserted, against a real
// PostgreSQL and a real broker: at the end every row is published exactly once in the topic (by
// event id) and marked. Then the crash between ack and mark, made on purpose: rows acknowledged
// but not marked go out again, and the topic's dedup window drops them.
//
// Cycles: at least 8, and as many as it takes to insert every row; CONDUIT_CRASH_CYCLES=N for
// more.

#include <signal.h>

#include <atomic>
#include <random>

#include "tests/outbox/relay_fixture.h"

namespace conduit::testing {
namespace {

constexpr int kRows = 2000;

int Cycles() {
  const char* cycles = std::getenv("CONDUIT_CRASH_CYCLES");
  return cycles ? std::atoi(cycles) : 8;
}

class OutboxCrashTest : public RelayProcessTest {};

TEST_F(OutboxCrashTest, EveryRowIsPublishedExactlyOnceAcrossSigkills) {
  std::mt19937 rng(20261201);
  // Rows go in while the relay is killed and restarted: transactions of 1..40 rows.
  std::atomic<bool> inserted{false};
  std::thread inserter([&] {
    auto conn = outbox::PgConnection::Open(pg_->conninfo("inserter"));
    EXPECT_TRUE(conn.ok()) << conn.status();
    std::mt19937 local(7);
    for (int next = 0; conn.ok() && next < kRows;) {
      const int n = std::min(kRows - next, std::uniform_int_distribution<int>(1, 40)(local));
      std::string sql =
          "INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, aggregate_version, "
          "payload) VALUES ";
      for (int i = next; i < next + n; ++i) {
        absl::StrAppend(&sql, i == next ? "" : ",", "('ev-", i, "', 'Created', 'agg-", i % 37,
                        "', ", i, ", 'p", i, "'::bytea)");
      }
      auto r = (*conn)->Exec(sql);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      next += n;
      absl::SleepFor(absl::Milliseconds(15));  // spread the inserts over the kill cycles
    }
    inserted = true;
  });

  // Each cycle: a relay starts on the backlog that built up while none ran, is seen publishing,
  // and is SIGKILLed 0..40 ms later (mid-batch: before an ack, between ack and mark, or after).
  // Cycles go on until every row is inserted.
  const int min_cycles = Cycles();
  int cycles = 0, killed_with_backlog = 0;
  for (; (cycles < min_cycles || !inserted.load()) && cycles < 500; ++cycles) {
    const std::string name = absl::StrCat("relay-", cycles);
    const int64_t published_before = Count("published_at IS NOT NULL");
    ChildProcess& relay = StartRelay(name, {"--batch", "10", "--poll-interval", "200ms"});
    ASSERT_TRUE(relay.started());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline && Count("published_at IS NOT NULL") == published_before &&
           (Count("published_at IS NULL") > 0 || !inserted.load())) {
      absl::SleepFor(absl::Milliseconds(2));  // until the relay is seen publishing
    }
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
    ASSERT_FALSE(relay.Exited()) << "relay exited by itself: " << ReadFile(dir_.Sub(name + ".log"));
    if (Count("published_at IS NULL") > 0) ++killed_with_backlog;
    relay.Kill(SIGKILL);
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(0, 150)(rng)));
  }
  inserter.join();

  ChildProcess& last = StartRelay("relay-last", {"--batch", "50", "--poll-interval", "200ms"});
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(30))) << Count("published_at IS NULL") << " left";
  ASSERT_TRUE(WaitLockHolder("relay-last", absl::Seconds(10)));  // its signal mask is set by then
  int status = last.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "SIGTERM is a clean stop; wait status " << status << "\n"
      << ReadFile(dir_.Sub("relay-last.log"));

  std::map<std::string, int> counts = EventIdCounts();
  EXPECT_EQ(counts.size(), static_cast<size_t>(kRows));
  for (int i = 0; i < kRows; ++i) {
    const auto it = counts.find(absl::StrCat("ev-", i));
    EXPECT_TRUE(it != counts.end() && it->second == 1)
        << "ev-" << i << " is in the topic " << (it == counts.end() ? 0 : it->second) << " times";
  }
  EXPECT_EQ(Count("published_at IS NOT NULL"), kRows);
  EXPECT_GT(killed_with_backlog, cycles / 2) << "kills fell while nothing was waiting";
  std::printf("relay kill cycles: %d (%d with a backlog), rows: %d, topic records: %zu\n", cycles,
              killed_with_backlog, kRows, TopicRecords().size());
}

TEST_F(OutboxCrashTest, RowsAcknowledgedButNotMarkedAreDroppedByTheDedupWindow) {
  Insert(0, 300);
  ChildProcess& relay = StartRelay("relay-a", {"--batch", "100", "--poll-interval", "200ms"});
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(20)));
  relay.Kill(SIGKILL);
  const size_t before = TopicRecords().size();
  ASSERT_EQ(before, 300u);

  // What a crash between the ack and the mark leaves: acknowledged rows without published_at.
  ASSERT_TRUE(
      db_->Exec("UPDATE conduit_outbox SET published_at = NULL WHERE sequence % 3 = 0").ok());
  ASSERT_EQ(Count("published_at IS NULL"), 100);
  StartRelay("relay-b", {"--batch", "100", "--poll-interval", "200ms"});
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(20)));

  std::map<std::string, int> counts = EventIdCounts();
  EXPECT_EQ(TopicRecords().size(), 300u) << "the re-published rows were appended again";
  for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
}

}  // namespace
}  // namespace conduit::testing
