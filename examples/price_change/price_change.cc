// The price-change pipeline end to end (examples/README.md): a product
// transaction writes an outbox row; conduit-outbox-relay publishes it to
// `product-events`; a search group keeps an index current behind a version
// guard; an analytics group counts price changes per 5-minute event-time
// window; a notification group turns changes into `send-merchant-email` jobs;
// an email worker calls a provider. The run forces the failures that happen in
// practice and checks what each guard promises; it exits 0 only when every
// check holds.
//
//   price_change [--postgres CONNINFO] [--relay PATH] HOST:PORT
//
// HOST:PORT is a conduit-standalone (`make run`). Without --postgres the
// example starts its own PostgreSQL (initdb + pg_ctl) in a temporary directory.
// It deletes and recreates its own topic, queue, groups and PostgreSQL schema
// (`price_change`).
#include <signal.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/hash/murmur2.h"
#include "examples/price_change/pipeline.h"
#include "examples/price_change/story.h"

namespace conduit::examples {

int Story::Run() {
  // Event times: the story's events happen in the 5-minute window that started
  // 30 to 35 minutes ago, and the next one; processing happens now, so every
  // lag is visible.
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  t0_ = absl::FromUnixSeconds(now_s - now_s % 300 - 1800);

  const bool completed = SetUp() && RelayCrash() && SearchCrash() && MoreChanges() &&
                         WorkerCrash() && PoisonEvent() && NextWindow() && LateEvent() &&
                         Rebuild() && EndState();
  if (relay_process_) relay_process_->Kill(SIGTERM);
  if (!completed) Say("\nThe story could not go on.");
  Say(Failures() == 0 ? "\nAll checks passed."
                      : absl::StrCat("\n", Failures(), " check(s) failed."));
  return Failures() == 0 && completed ? 0 : 1;
}

bool Story::SetUp() {
  Stage(0, "Set up");
  absl::Status s = SetUpDatabase();
  if (!Check(s.ok(),
             absl::StrCat("PostgreSQL schema `", kSchema, "`: products, outbox, search index ",
                          s.ok() ? "" : s.ToString()))) {
    return false;
  }
  s = SetUpConduit();
  if (!Check(s.ok(), absl::StrCat("topic ", kTopic, " (", kPartitions,
                                  " partitions, 24 h dedup window), queue ", kEmailQueue, " ",
                                  s.ok() ? "" : s.ToString()))) {
    return false;
  }
  s = provider_.Start();
  if (!Check(s.ok(), "fake email provider on " + provider_.address())) return false;
  search_ = StartSearch("search", "search_index", "evt-p-1-v2", 0, &search_unchanged_);
  analytics_ = StartAnalytics();
  notifications_ = StartNotifications();
  if (!search_ || !analytics_ || !notifications_) return false;
  Say("   groups search, analytics and notifications subscribed to " + std::string(kTopic));
  return true;
}

bool Story::RelayCrash() {
  Stage(1,
        "p-1 goes from 100 to 90; the relay crashes after publishing, "
        "before marking");
  const std::string first = ChangePrice("p-1", 90, "EUR", absl::Minutes(1));
  Check(first == "evt-p-1-v2", "products row and outbox row written in one transaction: " + first);
  // Hold the outbox table against updates so the relay can publish but not
  // mark, then kill it there: what a crash between the broker's ack and the
  // UPDATE leaves.
  std::unique_ptr<PgConnection> blocker = Db("blocker");
  if (blocker == nullptr ||
      !blocker->ExecScript("BEGIN; LOCK TABLE conduit_outbox IN SHARE MODE").ok()) {
    Check(false, "lock the outbox table");
    return false;
  }
  StartRelay();
  auto published_once = [&](const std::string& event_id) {
    int n = 0;
    for (const auto& r : TopicRecords()) n += r.event_id() == event_id;
    return n;
  };
  if (!Check(Eventually([&] { return published_once(first) == 1; }),
             "the relay published " + first + " (acknowledged by the broker)")) {
    return false;
  }
  absl::SleepFor(absl::Milliseconds(300));  // it is now waiting for the lock to mark the row
  relay_process_->Kill(SIGKILL);
  // Its session is blocked on the lock; PostgreSQL notices the client is gone
  // and ends it.
  auto waiting = [&] {
    return Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'");
  };
  if (!Eventually([&] { return waiting() == "0"; }, absl::Seconds(5))) {
    Say("   (ending the dead relay's session by hand: pg_terminate_backend)");
    (void)Scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock'");
  }
  (void)blocker->ExecScript("ROLLBACK");
  Check(Unpublished() == 1, "relay SIGKILLed: the row is still unpublished in the outbox");
  StartRelay();
  Check(Eventually([&] { return Unpublished() == 0; }),
        "a new relay published it again and marked it");
  Check(published_once(first) == 1,
        "the topic holds " + first + " once: the dedup window dropped the repeat");
  PrintBacklog();
  return true;
}

bool Story::SearchCrash() {
  Stage(2, "The search consumer crashes after writing the index, before committing");
  Check(Eventually([&] { return search_crashed_.load(); }), "search wrote p-1 and died");
  Check(SearchIndex("search_index")["p-1"] == "90 EUR v2", "index row p-1: 90 EUR v2");
  coordpb::DescribeGroupResponse group = DescribeGroup("search");
  Say(absl::StrCat("   group search: lag ", group.max_lag_records(), " record(s), ",
                   absl::StrFormat("%.1f", group.max_lag_seconds()),
                   " s: the offset was not "
                   "committed"));
  Check(group.max_lag_records() >= 1, "the write is not committed: lag >= 1");
  search_.reset();
  search_ = StartSearch("search", "search_index", "", 0, &search_unchanged_);
  Check(Eventually([&] {
          return search_unchanged_.load() >= 1 && DescribeGroup("search").max_lag_records() == 0;
        }),
        "a restarted consumer reads p-1 again; the version guard makes the "
        "repeat a no-op");
  Check(SearchIndex("search_index")["p-1"] == "90 EUR v2", "search converged: p-1 costs 90");
  PrintBacklog();
  return true;
}

bool Story::MoreChanges() {
  Stage(3, "More changes, one of them without a currency (a poison event)");
  std::vector<std::string> changes = {
      ChangePrice("p-2", 95, "EUR", absl::Minutes(2)),
      ChangePrice("p-3", 120, "EUR", absl::Minutes(3)),
      ChangePrice("p-7", 150, "EUR", absl::Seconds(200)),
      ChangePrice("p-7", 140, "EUR", absl::Seconds(220)),
      ChangePrice("p-9", 80, "", absl::Seconds(240)),
  };
  Say("   " + absl::StrJoin(changes, ", "));
  Check(Eventually([&] {
          return Unpublished() == 0 && DescribeGroup("notifications").max_lag_records() == 0;
        }),
        "published, and the notification group is caught up");
  PrintBacklog();
  return true;
}

bool Story::WorkerCrash() {
  Stage(4, "The email worker crashes after the provider accepted");
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    queuepb::LeaseRequest request;
    request.set_queue(kEmailQueue);
    request.set_worker_id("email-worker-1");
    request.set_max_jobs(1);
    request.mutable_visibility_timeout()->set_seconds(2);
    queuepb::LeaseResponse leased;
    if (!Check(queue_->Lease(&ctx, request, &leased).ok() && leased.jobs_size() == 1,
               "email-worker-1 leased a job (2 s lease)")) {
      return false;
    }
    client::Job job;
    job.id = leased.jobs(0).job_id();
    job.payload = leased.jobs(0).payload();
    for (const auto& h : leased.jobs(0).headers()) job.headers.emplace_back(h.key(), h.value());
    Check(SendMerchantEmail(provider_.address(), job).kind == client::Outcome::Kind::kAck,
          "the provider accepted its email");
    Say("   email-worker-1 dies before Ack; the lease runs out and the job is "
        "delivered again");
  }
  worker_ = std::make_unique<client::Worker>(
      client::WorkerOptions{.address = address_,
                            .queue = kEmailQueue,
                            .worker_id = "email-worker-2",
                            .visibility_timeout = absl::Seconds(5),
                            .lease_wait = absl::Milliseconds(500)},
      [this](const client::Job& job) { return SendMerchantEmail(provider_.address(), job); });
  worker_->Start();
  Check(Eventually([&] {
          auto q = QueueStats();
          int requests = 0;
          for (const auto& [key, d] : provider_.deliveries()) requests += d.requests;
          return q.ready() == 0 && q.leased() == 0 && q.delayed() == 0 && requests == 6;
        }),
        "email-worker-2 drained the queue, the redelivered job included");
  Check(provider_.deliveries().size() == 5, "5 emails for the 5 price changes with a currency");
  int repeats = 0;
  for (const auto& [key, d] : provider_.deliveries()) {
    if (d.requests > 1) {
      ++repeats;
      Say(absl::StrCat("   provider: ", key, " requested ", d.requests, " times, sent once"));
    }
  }
  Check(repeats == 1, "the crashed job's email was requested twice and sent once");
  PrintBacklog();
  return true;
}

bool Story::PoisonEvent() {
  Stage(5, "The poison event waits in the dead-letter lane; repair and redrive");
  queuepb::DeadLetter letter;
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    queuepb::ListDeadLettersRequest request;
    request.set_queue(kEmailQueue);
    queuepb::ListDeadLettersResponse response;
    if (!Check(queue_->ListDeadLetters(&ctx, request, &response).ok() &&
                   response.dead_letters_size() == 1,
               "one dead letter in " + std::string(kEmailQueue))) {
      return false;
    }
    letter = response.dead_letters(0);
  }
  std::map<std::string, std::string> evidence;
  for (const auto& h : letter.headers()) evidence[h.key()] = h.value();
  Say(absl::StrCat("   letter ", letter.job_id(), ": reason \"", letter.reason(), "\", ",
                   letter.attempts_size(), " attempt(s)"));
  for (const auto& [k, v] : evidence) Say("     " + k + ": " + v);
  Check(evidence["conduit-event-id"] == "evt-p-9-v2" &&
            evidence["conduit-source-topic"] == kTopic &&
            !evidence["conduit-source-offset"].empty() &&
            evidence["conduit-consumer-group"] == "notifications" &&
            evidence["conduit-consumer-version"] == "notifications-1.4.0" &&
            evidence["conduit-schema-version"] == "2" && letter.attempts_size() >= 1 &&
            letter.reason().find("no currency") != std::string::npos,
        "its evidence: event id, source topic and offset, group, consumer and "
        "schema versions, "
        "reason, attempts");
  auto broken = ParseEvent("evt-p-9-v2", kPriceChanged, letter.payload());
  if (!Check(broken.ok(), "the letter holds the original event")) return false;
  broken->currency = "EUR";  // the repair: the catalog's currency for m-2
  const std::string repaired = absl::StrFormat(
      R"({"product_id":"%s","merchant_id":"%s","old_price":%d,"new_price":%d,"currency":"EUR","version":%d})",
      broken->product_id, broken->merchant_id, broken->old_price, broken->new_price,
      broken->version);
  for (bool dry_run : {true, false}) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    queuepb::RedriveDeadLettersRequest request;
    request.set_queue(kEmailQueue);
    request.add_job_ids(letter.job_id());
    request.set_dry_run(dry_run);
    request.set_replacement_payload(repaired);
    queuepb::RedriveDeadLettersResponse response;
    Check(queue_->RedriveDeadLetters(&ctx, request, &response).ok() && response.job_ids_size() == 1,
          dry_run ? "redrive, dry run: it would move 1 letter" : "redrive with the repair");
  }
  Check(Eventually([&] { return provider_.deliveries().count(EmailKey(*broken)) == 1; }),
        "the repaired email was sent: " + EmailKey(*broken));
  PrintBacklog();
  return true;
}

bool Story::NextWindow() {
  Stage(6,
        "Next window: changes at +7 min on every partition, and a stale "
        "import of p-7 v183");
  std::set<int> covered;
  std::vector<std::string> ticks;
  for (int i = 10; i <= kProducts && covered.size() < kPartitions; ++i) {
    const std::string product = absl::StrCat("p-", i);
    if (covered.insert(hash::PartitionForKey(product, kPartitions)).second) {
      ticks.push_back(ChangePrice(product, 99, "EUR", absl::Minutes(7)));
    }
  }
  Check(covered.size() == kPartitions, "changes at +7 min: " + absl::StrJoin(ticks, ", "));
  // A catalog import that read p-7 before 184 replays its copy: version 183,
  // after 184.
  Check(
      Scalar("INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, "
             "aggregate_version, occurred_at, payload) VALUES "
             "('evt-p-7-v183-import', $1, "
             "'p-7', 183, $2::timestamptz, "
             "convert_to('{\"product_id\":\"p-7\",\"merchant_id\":"
             "\"m-4\",\"old_price\":100,\"new_price\":150,\"currency\":\"EUR\","
             "\"version\":183}',"
             " 'UTF8')) RETURNING event_id",
             {kPriceSnapshot, absl::FormatTime(t0_ + absl::Seconds(200))}) == "evt-p-7-v183-import",
      "stale snapshot of p-7 v183 in the outbox");
  Check(Eventually([&] { return !WindowResults().empty(); }),
        "the watermark (+7 min - 1 min lateness on every partition) closed the "
        "first window");
  const auto fired = WindowResults();
  if (!fired.empty()) {
    Say(absl::StrCat("   analytics: [",
                     absl::FormatTime("%H:%M", fired[0].window.start, absl::UTCTimeZone()), ", ",
                     absl::FormatTime("%H:%M", fired[0].window.end, absl::UTCTimeZone()),
                     ") UTC: ", fired[0].value, " price changes"));
  }
  Check(
      !fired.empty() && fired[0].window.start == t0_ && fired[0].value == 6 && !fired[0].correction,
      "6 price changes in the first window");
  Check(Eventually(
            [&] { return Unpublished() == 0 && DescribeGroup("search").max_lag_records() == 0; }),
        "search caught up");
  Check(SearchIndex("search_index")["p-7"] == "140 EUR v184",
        "the stale v183 did not overwrite v184: p-7 is 140 EUR v184");
  PrintBacklog();
  return true;
}

bool Story::LateEvent() {
  Stage(7, "A late event: a change that happened at +2:40, committed only now");
  const std::string late = ChangePrice("p-4", 85, "EUR", absl::Seconds(160));
  Check(Eventually([&] { return WindowResults().size() >= 2; }), "analytics saw " + late);
  const auto corrected = WindowResults();
  if (corrected.size() >= 2) {
    Say(absl::StrCat("   analytics: correction for the first window: ", corrected.back().value,
                     " price changes"));
  }
  Check(corrected.size() == 2 && corrected[1].correction && corrected[1].window.start == t0_ &&
            corrected[1].value == 7,
        "the late event corrected the first window from 6 to 7");
  Check(Eventually([&] { return provider_.deliveries().size() == 10; }),
        "its email went out too (10 emails in all)");
  PrintBacklog();
  return true;
}

bool Story::Rebuild() {
  Stage(8, "Rebuild search into a new index by replay from offset 0, throttled");
  coordpb::DescribeGroupResponse before = DescribeGroup("notifications");
  const size_t emails_before = provider_.deliveries().size();
  const int64_t records = static_cast<int64_t>(TopicRecords().size());
  const absl::Time replay_start = absl::Now();
  rebuild_ = StartSearch("search-rebuild", "search_index_v2", "", kReplayRate, nullptr);
  if (!rebuild_) return false;
  Check(Eventually([&] {
          coordpb::DescribeGroupResponse d = DescribeGroup("search-rebuild");
          int64_t committed = 0;
          for (const auto& p : d.partitions()) committed += p.committed_offset();
          return committed == records;
        }),
        absl::StrCat("search-rebuild replayed all ", records, " records at ", kReplayRate,
                     " records/s"));
  const absl::Duration took = absl::Now() - replay_start;
  Say(absl::StrCat("   replay took ",
                   absl::FormatDuration(absl::Trunc(took, absl::Milliseconds(100)))));
  // The limiter's bucket starts with a second's worth.
  Check(took >= absl::Seconds((records - kReplayRate) / kReplayRate),
        "the rate limit held the replay back");
  Check(SearchIndex("search_index_v2") == SearchIndex("search_index"),
        "the rebuilt index equals the live one");
  Check(db_->ExecScript("CREATE OR REPLACE VIEW search AS SELECT * FROM search_index_v2").ok(),
        "cut over: the view `search` now reads search_index_v2");
  coordpb::DescribeGroupResponse after = DescribeGroup("notifications");
  bool same = before.partitions_size() == after.partitions_size();
  for (int i = 0; same && i < before.partitions_size(); ++i) {
    same = before.partitions(i).committed_offset() == after.partitions(i).committed_offset();
  }
  Check(same && provider_.deliveries().size() == emails_before,
        "the notification group stayed where it was: no email sent twice");
  return true;
}

bool Story::EndState() {
  Stage(9, "End state");
  std::map<std::string, int> by_event;
  for (const auto& r : TopicRecords()) ++by_event[r.event_id()];
  bool once = true;
  for (const auto& [id, n] : by_event) once = once && n == 1;
  const int64_t rows = std::stoll(Scalar("SELECT count(*) FROM conduit_outbox"));
  Check(once && static_cast<int64_t>(by_event.size()) == rows && Unpublished() == 0,
        absl::StrCat("every one of the ", rows, " outbox rows is in the topic exactly once"));
  int sent_once = 0;
  for (const auto& [key, d] : provider_.deliveries()) sent_once += !d.body.empty();
  Check(sent_once == 10, "exactly one email per (event, merchant): 10 emails");
  PrintBacklog();
  return true;
}

}  // namespace conduit::examples
