#include "examples/price_change/story.h"

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "examples/price_change/pipeline.h"

namespace conduit::examples {

namespace {
int failures = 0;
}  // namespace

void Say(const std::string& line) { std::cout << line << std::endl; }
void Stage(int n, const std::string& title) {
  std::cout << "\n== " << n << ". " << title << " ==" << std::endl;
}
bool Check(bool ok, const std::string& what) {
  std::cout << (ok ? "   ok    " : "   FAIL  ") << what << std::endl;
  if (!ok) ++failures;
  return ok;
}
bool Eventually(const std::function<bool()>& ready, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}
void Deadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

int Failures() { return failures; }

std::unique_ptr<PgConnection> Story::Db(const std::string& name) {
  auto conn = PgConnection::Open(absl::StrCat(conninfo_, " options='-c search_path=", kSchema,
                                              " -c client_min_messages=warning'"),
                                 name);
  if (!conn.ok()) {
    Say(absl::StrCat("cannot connect to PostgreSQL: ", conn.status().ToString()));
    return nullptr;
  }
  return *std::move(conn);
}

std::string Story::Scalar(const std::string& sql, const std::vector<std::string>& params) {
  auto r = db_->Exec(sql, params);
  if (!r.ok()) {
    Say("   postgres: " + r.status().ToString());
    return "";
  }
  return PQntuples(r->get()) < 1 ? "" : PQgetvalue(r->get(), 0, 0);
}

absl::Status Story::SetUpDatabase() {
  db_ = Db("price-change-story");
  if (db_ == nullptr) return absl::UnavailableError("PostgreSQL");
  std::ifstream sql_file(CONDUIT_OUTBOX_SQL);
  const std::string outbox_sql((std::istreambuf_iterator<char>(sql_file)), {});
  if (outbox_sql.empty()) return absl::NotFoundError(CONDUIT_OUTBOX_SQL);
  const std::string schema =
      absl::StrCat("DROP SCHEMA IF EXISTS ", kSchema, " CASCADE; CREATE SCHEMA ", kSchema, ";",
                   "CREATE TABLE products (id text PRIMARY KEY, merchant_id text NOT NULL, "
                   "price bigint NOT "
                   "NULL, currency text, version bigint NOT NULL);",
                   "CREATE TABLE search_index (product_id text PRIMARY KEY, price bigint "
                   "NOT NULL, currency "
                   "text NOT NULL, version bigint NOT NULL);",
                   "CREATE TABLE search_index_v2 (LIKE search_index INCLUDING ALL);",
                   "CREATE VIEW search AS SELECT * FROM search_index;",
                   // p-7 has a long history: its next two versions are 183 and 184.
                   "INSERT INTO products SELECT 'p-' || i, 'm-' || (i % 4 + 1), 100, 'EUR', "
                   "CASE WHEN i = 7 THEN 182 ELSE 1 END FROM generate_series(1, ",
                   kProducts, ") AS i;");
  if (auto s = db_->ExecScript(schema); !s.ok()) return s;
  return db_->ExecScript(outbox_sql);
}

absl::Status Story::SetUpConduit() {
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    logpb::DeleteTopicRequest request;
    request.set_name(kTopic);
    logpb::DeleteTopicResponse response;
    (void)log_->DeleteTopic(&ctx, request, &response);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    logpb::CreateTopicRequest request;
    request.set_name(kTopic);
    request.set_partitions(kPartitions);
    // The relay's re-publishes after a crash carry the same event id: dropped
    // here.
    request.mutable_config()->mutable_dedup_window()->set_seconds(24 * 3600);
    logpb::CreateTopicResponse response;
    grpc::Status s = log_->CreateTopic(&ctx, request, &response);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("CreateTopic: ", s.error_message()));
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    queuepb::DeleteQueueRequest request;
    request.set_name(kEmailQueue);
    queuepb::DeleteQueueResponse response;
    (void)queue_->DeleteQueue(&ctx, request, &response);
  }
  {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    queuepb::CreateQueueRequest request;
    request.set_name(kEmailQueue);
    request.mutable_config()->set_max_attempts(5);
    request.mutable_config()->mutable_backoff_initial()->set_nanos(200'000'000);
    queuepb::CreateQueueResponse response;
    grpc::Status s = queue_->CreateQueue(&ctx, request, &response);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("CreateQueue: ", s.error_message()));
  }
  for (const char* group : {"search", "search-rebuild", "analytics", "notifications"}) {
    grpc::ClientContext ctx;
    Deadline(&ctx);
    coordpb::DeleteGroupRequest request;
    request.set_group_id(group);
    coordpb::DeleteGroupResponse response;
    (void)groups_->DeleteGroup(&ctx, request, &response);
  }
  return absl::OkStatus();
}

// The transactional outbox: the product's new price and version, and the outbox row describing
// the change, commit together or not at all. Returns the event id ("" when it failed).
std::string Story::ChangePrice(const std::string& product, int64_t price,
                               const std::string& currency, absl::Duration occurred) {
  if (!db_->ExecScript("BEGIN").ok()) return "";
  const std::string old_price =
      Scalar("SELECT price FROM products WHERE id = $1 FOR UPDATE", {product});
  std::string event_id;
  if (!old_price.empty() &&
      !Scalar("UPDATE products SET price = $2, currency = NULLIF($3, ''), version = version + 1 "
              "WHERE id = $1 RETURNING id",
              {product, absl::StrCat(price), currency})
           .empty()) {
    event_id = Scalar(
        "INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, aggregate_version, "
        "occurred_at, payload, headers) "
        "SELECT 'evt-' || id || '-v' || version, 'PriceChanged', id, version, $2::timestamptz, "
        "convert_to(json_build_object('product_id', id, 'merchant_id', merchant_id, "
        "'old_price', $3::bigint, 'new_price', price, 'currency', currency, 'version', "
        "version)::text, 'UTF8'), '{\"schema-version\": \"2\"}' "
        "FROM products WHERE id = $1 RETURNING event_id",
        {product, absl::FormatTime(t0_ + occurred), old_price});
  }
  (void)db_->ExecScript(event_id.empty() ? "ROLLBACK" : "COMMIT");
  return event_id;
}

client::ConsumerOptions Story::ConsumerOptionsFor(const std::string& group) {
  client::ConsumerOptions o;
  o.address = address_;
  o.group = group;
  o.topics = {kTopic};
  o.client_id = group;
  o.session_timeout = absl::Seconds(2);
  return o;
}

std::unique_ptr<Loop> Story::StartSearch(const std::string& group, const std::string& table,
                                         const std::string& crash_at, double rate,
                                         std::atomic<int>* unchanged) {
  client::ConsumerOptions options = ConsumerOptionsFor(group);
  options.max_records_per_second = rate;
  auto consumer = client::GroupConsumer::Create(options);
  std::shared_ptr<PgConnection> db = Db(group);
  if (!consumer.ok() || db == nullptr) {
    Check(false,
          absl::StrCat("search consumer ", group, " starts: ", consumer.status().ToString()));
    return nullptr;
  }
  std::shared_ptr<client::GroupConsumer> c = *std::move(consumer);
  return std::make_unique<Loop>([this, c, db, table, crash_at, unchanged] {
    auto records = c->Poll(absl::Milliseconds(200));
    if (!records.ok()) return true;
    for (const ConsumedRecord& r : *records) {
      auto event = ParseEvent(r);
      if (!event.ok()) continue;  // search skips what it cannot index
      auto changed = ApplyToSearchIndex(*db, table, *event);
      if (!changed.ok()) return true;  // not committed: read again
      if (!*changed && unchanged != nullptr) ++*unchanged;
      if (event->event_id == crash_at) {
        c->Abandon();  // the row is written, the offset is not committed
        search_crashed_ = true;
        return false;
      }
    }
    if (!records->empty()) (void)c->Commit();
    return true;
  });
}

std::unique_ptr<Loop> Story::StartAnalytics() {
  auto consumer = client::GroupConsumer::Create(ConsumerOptionsFor("analytics"));
  auto op =
      client::WindowOperator<int64_t>::Create({.spec = client::WindowSpec::Fixed(absl::Minutes(5)),
                                               .allowed_lateness = absl::Minutes(1),
                                               .late_policy = client::LatePolicy::kCorrect},
                                              client::CountAggregate());
  if (!consumer.ok() || !op.ok()) {
    Check(false, "analytics consumer starts");
    return nullptr;
  }
  std::shared_ptr<client::GroupConsumer> c = *std::move(consumer);
  auto windows = std::make_shared<client::WindowOperator<int64_t>>(*std::move(op));
  return std::make_unique<Loop>([this, c, windows] {
    auto records = c->Poll(absl::Milliseconds(200));
    if (!records.ok()) return true;
    for (ConsumedRecord r : *records) {
      if (HeaderOf(r, "event-type") != kPriceChanged) continue;
      r.key.reset();  // count every product's changes together
      auto out = windows->Add(r);
      absl::MutexLock lock(&windows_mu_);
      for (auto& result : out.results) windows_.push_back(result);
    }
    if (!records->empty()) (void)c->Commit();
    return true;
  });
}

std::unique_ptr<Loop> Story::StartNotifications() {
  client::ConsumerOptions options = ConsumerOptionsFor("notifications");
  options.retry = {.max_attempts = 3, .backoff_initial = absl::Milliseconds(50)};
  options.dead_letter = client::DeadLetterTarget{
      .queue_address = address_, .queue = kEmailQueue, .consumer_version = "notifications-1.4.0"};
  auto consumer = client::GroupConsumer::Create(options);
  if (!consumer.ok()) {
    Check(false, absl::StrCat("notification consumer starts: ", consumer.status().ToString()));
    return nullptr;
  }
  std::shared_ptr<client::GroupConsumer> c = *std::move(consumer);
  return std::make_unique<Loop>([this, c] {
    (void)c->ProcessAndCommit(absl::Milliseconds(200), [this](const ConsumedRecord& r) {
      return EnqueueMerchantEmail(*queue_, r);
    });
    return true;
  });
}

coordpb::DescribeGroupResponse Story::DescribeGroup(const std::string& group) {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  coordpb::DescribeGroupRequest request;
  request.set_group_id(group);
  coordpb::DescribeGroupResponse response;
  (void)groups_->DescribeGroup(&ctx, request, &response);
  return response;
}

queuepb::GetQueueStatsResponse Story::QueueStats() {
  grpc::ClientContext ctx;
  Deadline(&ctx);
  queuepb::GetQueueStatsRequest request;
  request.set_queue(kEmailQueue);
  queuepb::GetQueueStatsResponse response;
  (void)queue_->GetQueueStats(&ctx, request, &response);
  return response;
}

void Story::PrintBacklog() {
  std::string groups;
  for (const char* g : {"search", "analytics", "notifications"}) {
    coordpb::DescribeGroupResponse d = DescribeGroup(g);
    absl::StrAppendFormat(&groups, "  %s %d (%.1fs)", g, d.max_lag_records(), d.max_lag_seconds());
  }
  queuepb::GetQueueStatsResponse q = QueueStats();
  Say(
      absl::StrFormat("   backlog: outbox %d unpublished | lag%s | %s ready %d, leased %d, "
                      "dead %d, oldest "
                      "ready %.1fs",
                      Unpublished(), groups, kEmailQueue, q.ready(), q.leased(), q.dead(),
                      q.oldest_ready_age().seconds() + q.oldest_ready_age().nanos() / 1e9));
}

std::vector<logpb::Record> Story::TopicRecords() {
  std::vector<logpb::Record> all;
  for (int p = 0; p < kPartitions; ++p) {
    for (int64_t offset = 0;;) {
      grpc::ClientContext ctx;
      Deadline(&ctx);
      logpb::FetchRequest request;
      request.set_topic(kTopic);
      request.set_partition(p);
      request.set_offset(offset);
      logpb::FetchResponse response;
      if (!log_->Fetch(&ctx, request, &response).ok() || response.records().empty()) break;
      for (auto& r : *response.mutable_records()) all.push_back(std::move(r));
      offset = response.next_offset();
    }
  }
  return all;
}

std::map<std::string, std::string> Story::SearchIndex(const std::string& table) {
  std::map<std::string, std::string> rows;
  auto r =
      db_->Exec(absl::StrCat("SELECT product_id, price || ' ' || currency || ' v' || version "
                             "FROM ",
                             table));
  if (!r.ok()) return rows;
  for (int i = 0; i < PQntuples(r->get()); ++i) {
    rows[PQgetvalue(r->get(), i, 0)] = PQgetvalue(r->get(), i, 1);
  }
  return rows;
}

}  // namespace conduit::examples
