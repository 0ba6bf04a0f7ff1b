// conduit-outbox-relay throughput: prints figures, asserts nothing.
//
//   outbox_relay_bench [--rows=20000] [--batches=100,500,1000] [--payload_bytes=100]
//
// For each batch size, on a fresh PostgreSQL 15 (its own initdb in a temp dir, unix socket,
// fsync on) and a fresh conduit-standalone (topic of 4 partitions, sync durability, dedup window
// 1 h): --rows rows are inserted up front, then one relay is started and the time from its start
// to the last row's published_at is the drain rate (rows/s; includes the relay's start, about
// one connection and one InitProducer). Needs CONDUIT_BIN_DIR (default build/bin).

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/outbox/relay_fixture.h"

ABSL_FLAG(int, rows, 20000, "rows in the outbox before the relay starts");
ABSL_FLAG(std::string, batches, "100,500,1000", "relay --batch values, one run each");
ABSL_FLAG(int, payload_bytes, 100, "payload size of each row");

namespace conduit::testing {
namespace {

int64_t Unpublished(outbox::PgConnection& db) {
  auto r = db.Exec("SELECT count(*) FROM conduit_outbox WHERE published_at IS NULL");
  int64_t n = -1;
  return r.ok() && absl::SimpleAtoi(PQgetvalue(r->get(), 0, 0), &n) ? n : -1;
}

int Run(const std::string& bin, int rows, int batch, int payload_bytes) {
  TempDir dir;
  PostgresProcess pg(dir.path(), /*fsync=*/true);
  if (!pg.running()) {
    std::fprintf(stderr, "postgres did not start; see %s\n", pg.log().c_str());
    return 1;
  }
  auto db = outbox::PgConnection::Open(pg.conninfo());
  const char* src = std::getenv("CONDUIT_SOURCE_DIR");
  const std::string sql = ReadFile(std::string(src ? src : ".") + "/tools/outbox_relay/outbox.sql");
  if (!db.ok() || sql.empty() || !(*db)->ExecScript(sql).ok()) {
    std::fprintf(stderr, "cannot set up the outbox table (run from the source dir)\n");
    return 1;
  }
  const std::string fill = absl::StrCat(
      "INSERT INTO conduit_outbox (event_id, event_type, aggregate_id, aggregate_version, payload,"
      " headers) SELECT 'ev-' || i, 'Created', 'agg-' || (i % 1000), i, convert_to(repeat('x', ",
      payload_bytes, "), 'UTF8'), '{\"tenant\": \"acme\"}' FROM generate_series(1, ", rows,
      ") AS i");
  if (!(*db)->Exec(fill).ok()) return 1;
  ServerProcess broker(bin + "/conduit-standalone", dir.Sub("data"), dir.path());
  if (!broker.running()) return 1;

  const absl::Time start = absl::Now();
  ChildProcess relay({bin + "/conduit-outbox-relay", "--postgres", pg.conninfo("relay"), "--broker",
                      broker.address(), "--topic", "outbox", "--batch", absl::StrCat(batch),
                      "--metrics-port", "-1", "--log-level", "warn"},
                     dir.Sub("relay.log"));
  int64_t left = rows;
  while ((left = Unpublished(**db)) > 0 && absl::Now() - start < absl::Minutes(5)) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  relay.Kill(SIGTERM);
  if (left != 0) {
    std::fprintf(stderr, "batch %d: %lld rows left unpublished\n", batch,
                 static_cast<long long>(left));
    return 1;
  }
  std::printf("outbox relay: %d rows of %d B, batch %4d: %8.0f rows/s (%.2f s)\n", rows,
              payload_bytes, batch, rows / seconds, seconds);
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace conduit::testing

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  const std::string bin = bin_dir ? bin_dir : "build/bin";
  int rc = 0;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int batch = 0;
    if (!absl::SimpleAtoi(b, &batch) || batch < 1) continue;
    rc |= conduit::testing::Run(bin, absl::GetFlag(FLAGS_rows), batch,
                                absl::GetFlag(FLAGS_payload_bytes));
  }
  return rc;
}
