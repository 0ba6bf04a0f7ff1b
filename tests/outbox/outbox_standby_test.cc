// Two relays on one outbox: only the advisory lock's holder publishes; when it is killed the
// standby takes over. And the wake-up: a NOTIFY brings a row out long before the poll
// interval; without the trigger, polling does.

#include <signal.h>

#include "tests/outbox/relay_fixture.h"

namespace conduit::testing {
namespace {

class OutboxStandbyTest : public RelayProcessTest {
 protected:
  // Starts a relay serving metrics on a free port; returns that port (0 if it never came).
  int StartWithMetrics(const std::string& name, std::vector<std::string> extra = {}) {
    const std::string port_file = dir_.Sub(name + ".port");
    extra.insert(extra.end(), {"--metrics-port", "0", "--metrics-port-file", port_file});
    StartRelay(name, extra);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      int port = 0;
      if (std::ifstream(port_file) >> port && port > 0) return port;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return 0;
  }
};

TEST_F(OutboxStandbyTest, OnlyTheLockHolderPublishesAndTheStandbyTakesOver) {
  const int a = StartWithMetrics("relay-a", {"--poll-interval", "200ms"});
  ASSERT_GT(a, 0);
  ASSERT_TRUE(WaitLockHolder("relay-a", absl::Seconds(10)));
  const int b = StartWithMetrics("relay-b", {"--poll-interval", "200ms"});
  ASSERT_GT(b, 0);
  Insert(0, 200);
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(300));  // several standby retries of relay-b
  EXPECT_EQ(LockHolder(), "relay-a");
  EXPECT_EQ(ScrapeMetric(a, "conduit_outbox_relay_published_rows_total"), 200);
  EXPECT_EQ(ScrapeMetric(a, "conduit_outbox_relay_active"), 1);
  EXPECT_EQ(ScrapeMetric(b, "conduit_outbox_relay_published_rows_total"), 0)
      << "the standby published";
  EXPECT_EQ(ScrapeMetric(b, "conduit_outbox_relay_active"), 0);

  relays_[0]->Kill(SIGKILL);  // relay-a
  ASSERT_TRUE(WaitLockHolder("relay-b", absl::Seconds(10))) << "the standby did not take over";
  Insert(200, 100);
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(20)));
  EXPECT_EQ(ScrapeMetric(b, "conduit_outbox_relay_published_rows_total"), 100);
  EXPECT_EQ(ScrapeMetric(b, "conduit_outbox_relay_active"), 1);
  EXPECT_EQ(ScrapeMetric(b, "conduit_outbox_relay_oldest_unpublished_age_seconds"), 0);

  std::map<std::string, int> counts = EventIdCounts();
  EXPECT_EQ(counts.size(), 300u);
  for (const auto& [id, n] : counts) EXPECT_EQ(n, 1) << id;
}

TEST_F(OutboxStandbyTest, ANotifyWakesTheRelayLongBeforeThePollInterval) {
  StartRelay("relay-a", {"--poll-interval", "60s"});
  ASSERT_TRUE(WaitLockHolder("relay-a", absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(500));  // its first (empty) read done, it waits for a NOTIFY
  // The control: a row inserted without the trigger waits for the (60 s) poll.
  ASSERT_TRUE(db_->Exec("ALTER TABLE conduit_outbox DISABLE TRIGGER conduit_outbox_notify").ok());
  Insert(0, 1);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Count("published_at IS NULL"), 1) << "published without a NOTIFY";
  ASSERT_TRUE(db_->Exec("ALTER TABLE conduit_outbox ENABLE TRIGGER conduit_outbox_notify").ok());
  ASSERT_TRUE(db_->Exec("INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, "
                        "aggregate_version, occurred_at, payload, headers) VALUES ('order-1', "
                        "'OrderPlaced', 'order-7', 3, '2026-01-02 03:04:05.678901+00', "
                        "'\\x00ff41'::bytea, '{\"tenant\": \"acme\", \"n\": 5}')")
                  .ok());
  const absl::Time inserted = absl::Now();
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - inserted, absl::Seconds(3)) << "woken by the poll, not the NOTIFY";

  // The record as the README maps it.
  std::vector<logpb::Record> records = TopicRecords();
  ASSERT_EQ(records.size(), 2u);  // ev-0 went out with it
  const logpb::Record& r = records[0].event_id() == "order-1" ? records[0] : records[1];
  EXPECT_EQ(r.event_id(), "order-1");
  EXPECT_EQ(r.key(), "order-7");
  EXPECT_EQ(r.value(), std::string("\x00\xff\x41", 3));
  EXPECT_EQ(r.event_time().seconds(),
            absl::ToUnixSeconds(
                absl::FromCivil(absl::CivilSecond(2026, 1, 2, 3, 4, 5), absl::UTCTimeZone())));
  EXPECT_EQ(r.event_time().nanos(), 678901000);
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& h : r.headers()) headers.emplace_back(h.key(), h.value());
  EXPECT_EQ(headers,
            (std::vector<std::pair<std::string, std::string>>{
                {"event-type", "OrderPlaced"}, {"aggregate-version", "3"}, {"tenant", "acme"}}))
      << "the number field n is not a string: not a header";
}

TEST_F(OutboxStandbyTest, WithoutTheTriggerThePollFindsTheRows) {
  ASSERT_TRUE(db_->Exec("ALTER TABLE conduit_outbox DISABLE TRIGGER conduit_outbox_notify").ok());
  StartRelay("relay-a", {"--poll-interval", "300ms"});
  ASSERT_TRUE(WaitLockHolder("relay-a", absl::Seconds(10)));
  Insert(0, 10);
  ASSERT_TRUE(WaitAllPublished(absl::Seconds(5)));
  EXPECT_EQ(EventIdCounts().size(), 10u);
}

}  // namespace
}  // namespace conduit::testing
