// Bridge throughput: how fast a bridge moves a topic's backlog into a queue, each batch enqueued
// durably (fsynced) and then committed. Prints figures, asserts nothing.
//
//   bridge_bench [--records=200000] [--partitions=8] [--value_bytes=100] [--runs=3]
//
// A real conduit-standalone (build/bin, or CONDUIT_BIN_DIR) on 127.0.0.1:0 with a temp data dir.
// Per run: a new topic gets the backlog (not timed), then a bridge into a new queue is created;
// the time from CreateBridge until the queue holds every record is the figure.

#include <cstdio>
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"
#include "tests/support/bridge_client.h"
#include "tests/support/server_process.h"

ABSL_FLAG(int, records, 200000, "backlog records per run");
ABSL_FLAG(int, partitions, 8, "partitions of the topic");
ABSL_FLAG(int, value_bytes, 100, "bytes per record value");
ABSL_FLAG(int, runs, 3, "runs (each on a new topic, queue and bridge)");

namespace conduit::bench {
namespace {

using testing::BridgeClient;
using testing::LogClient;
namespace qpb = ::conduit::queue::v1;
namespace logpb = ::conduit::log::v1;

int Main() {
  const char* bin = std::getenv("CONDUIT_BIN_DIR");
  testing::TempDir dir;
  std::filesystem::create_directories(dir.Sub("work"));
  testing::ServerProcess server(std::string(bin ? bin : "build/bin") + "/conduit-standalone",
                                dir.Sub("data"), dir.Sub("work"));
  if (!server.running()) {
    std::fprintf(stderr, "conduit-standalone did not start (see %s/work/server.log)\n",
                 dir.path().c_str());
    return 1;
  }
  LogClient log(server.address());
  BridgeClient client(server.address());
  const int records = absl::GetFlag(FLAGS_records);
  const int partitions = absl::GetFlag(FLAGS_partitions);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'x');
  std::printf("bridge_bench: %d records of %zu B over %d partitions per run, topic sync, queue "
              "fsynced per batch\n",
              records, value.size(), partitions);
  for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
    const std::string topic = absl::StrCat("t", run), queue = absl::StrCat("q", run);
    if (!log.CreateTopic(topic, partitions).ok() || !client.CreateQueue(queue).ok()) return 1;
    for (int i = 0; i < records; i += 1000) {
      logpb::ProduceRequest req;
      req.set_topic(topic);
      for (int j = i; j < std::min(records, i + 1000); ++j) {
        auto* r = req.add_records();
        r->set_partition(j % partitions);
        r->set_value(value);
      }
      logpb::ProduceResponse resp;
      if (!log.Produce(req, &resp).ok()) return 1;
    }
    qpb::BridgeSpec spec;
    spec.set_name(absl::StrCat("b", run));
    spec.set_topic(topic);
    spec.set_queue(queue);
    const absl::Time started = absl::Now();
    if (!client.CreateBridge(spec).ok()) return 1;
    while (client.Jobs(queue) < records) absl::SleepFor(absl::Milliseconds(5));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - started);
    std::printf("run %d: %d records topic -> queue in %.2f s = %.0f records/s\n", run, records,
                seconds, records / seconds);
  }
  server.Kill(SIGTERM);
  return 0;
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return conduit::bench::Main();
}
