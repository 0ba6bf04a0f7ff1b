#pragma once

// What the outbox relay's process tests share: a PostgreSQL of their own with outbox.sql
// applied, a conduit-standalone broker, conduit-outbox-relay children, and reads of the table
// and the topic.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "tests/support/child_process.h"
#include "tests/support/http_metrics.h"
#include "tests/support/log_client.h"
#include "tests/support/postgres_process.h"
#include "tests/support/server_process.h"
#include "tools/outbox_relay/pg_connection.h"

namespace conduit::testing {

inline std::string BinDir() {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  return bin_dir ? bin_dir : ".";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// GET http://127.0.0.1:<port>/metrics (HttpGetMetrics); the value of the first sample named `name`
// (with any labels), or -1 when absent or unreachable.
inline double ScrapeMetric(int port, const std::string& name) {
  const std::string body = HttpGetMetrics(port);
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    double v = -1;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return -1;
}

class RelayProcessTest : public ::testing::Test {
 protected:
  static constexpr int kPartitions = 4;

  void SetUp() override {
    ASSERT_NE(std::getenv("CONDUIT_BIN_DIR"), nullptr) << "CONDUIT_BIN_DIR is set by CTest";
    if (!PostgresProcess::Installed()) {
      GTEST_SKIP() << "PostgreSQL 15 is not installed (scripts/install-deps.sh)";
    }
    pg_ = std::make_unique<PostgresProcess>(dir_.path());
    ASSERT_TRUE(pg_->running()) << "postgres did not start; see " << pg_->log();
    auto conn = outbox::PgConnection::Open(pg_->conninfo());
    ASSERT_TRUE(conn.ok()) << conn.status();
    db_ = std::move(*conn);
    const char* src = std::getenv("CONDUIT_SOURCE_DIR");
    ASSERT_NE(src, nullptr);
    const std::string sql = ReadFile(std::string(src) + "/tools/outbox_relay/outbox.sql");
    ASSERT_FALSE(sql.empty());
    ASSERT_TRUE(db_->ExecScript(sql).ok());
    broker_ = std::make_unique<ServerProcess>(BinDir() + "/conduit-standalone", dir_.Sub("data"),
                                              dir_.path());
    ASSERT_TRUE(broker_->running()) << "see " << dir_.path() << "/server.log";
  }

  void TearDown() override {
    relays_.clear();  // SIGKILLed if still running
    broker_.reset();
    db_.reset();
    pg_.reset();  // a fast shutdown
  }

  // Starts a relay; `name` is its application_name (pg_stat_activity) and log file stem.
  ChildProcess& StartRelay(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {BinDir() + "/conduit-outbox-relay",
                                     "--postgres",
                                     pg_->conninfo(name),
                                     "--broker",
                                     broker_->address(),
                                     "--topic",
                                     "outbox",
                                     "--create-topic-partitions",
                                     absl::StrCat(kPartitions),
                                     "--dedup-window",
                                     "1h",
                                     "--standby-retry",
                                     "100ms",
                                     "--log-level",
                                     "warn"};
    bool has_metrics = false;
    for (const auto& e : extra) has_metrics |= e == "--metrics-port";
    if (!has_metrics) argv.insert(argv.end(), {"--metrics-port", "-1"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    relays_.push_back(std::make_unique<ChildProcess>(argv, dir_.Sub(name + ".log")));
    return *relays_.back();
  }

  // Inserts rows `from`..`from + n - 1` in one transaction (event ids "ev-<i>").
  void Insert(int from, int n) {
    std::string sql =
        "INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, aggregate_version, "
        "payload, headers) VALUES ";
    for (int i = from; i < from + n; ++i) {
      absl::StrAppend(&sql, i == from ? "" : ",", "('ev-", i, "', 'Created', 'agg-", i % 37, "', ",
                      i, ", 'payload-", i, "'::bytea, '{\"n\": \"", i, "\"}')");
    }
    auto r = db_->Exec(sql);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  int64_t Count(const std::string& where) {
    auto r = db_->Exec(absl::StrCat("SELECT count(*) FROM conduit_outbox WHERE ", where));
    if (!r.ok()) return -1;
    int64_t n = -1;
    return absl::SimpleAtoi(PQgetvalue(r->get(), 0, 0), &n) ? n : -1;
  }

  // Waits until no row is unpublished; false after `timeout`.
  bool WaitAllPublished(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (Count("published_at IS NULL") == 0) return true;
      absl::SleepFor(absl::Milliseconds(20));  // polling another process's progress
    }
    return false;
  }

  // The application_name of the session holding an advisory lock ("" when none does).
  std::string LockHolder() {
    auto r = db_->Exec(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.granted");
    if (!r.ok() || PQntuples(r->get()) == 0) return "";
    return PQgetvalue(r->get(), 0, 0);
  }

  bool WaitLockHolder(const std::string& name, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (LockHolder() == name) return true;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  // Every record of the topic, all partitions.
  std::vector<logpb::Record> TopicRecords() {
    LogClient client(broker_->address());
    std::vector<logpb::Record> all;
    for (int p = 0; p < kPartitions; ++p) {
      grpc::Status s = client.FetchAll("outbox", p, &all);
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return all;
  }

  // How many times each event id is in the topic.
  std::map<std::string, int> EventIdCounts() {
    std::map<std::string, int> counts;
    for (const auto& r : TopicRecords()) ++counts[r.event_id()];
    return counts;
  }

  TempDir dir_;
  std::unique_ptr<PostgresProcess> pg_;
  std::unique_ptr<outbox::PgConnection> db_;
  std::unique_ptr<ServerProcess> broker_;
  std::vector<std::unique_ptr<ChildProcess>> relays_;
};

}  // namespace conduit::testing
