// log_bench: printing the figures.

#include <sys/statfs.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <rocksdb/version.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/log_bench.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

namespace conduit::bench {

void PrintProduceHeader() {
  std::printf("\n== produce (records/s and MB/s of value bytes; latency per request, send -> ack)\n");
  std::printf("   avg_us: client mean; srv_us: service mean (receipt -> Finish); wal_us: mean "
              "write+fsync (sync) or background SyncWAL (interval); cpu: cores this process used;\n"
              "   rss_MB: resident now (after the scenario's broker closed); peakMB: peak so far\n");
  std::printf("%5s %4s %4s %-8s %5s | %10s %7s %8s %8s %8s %8s %8s | %7s %7s %7s %7s | %10s %5s "
              "| %4s %4s %6s %6s\n",
              "size", "part", "prod", "dur", "batch", "rec/s", "MB/s", "p50_us", "p99_us",
              "p999_us", "avg_us", "srv_us", "syncs/s", "wal_us", "req/cmt", "rec/cmt",
              "ceil rec/s", "ratio", "cpu", "errs", "rss_MB", "peakMB");
}

void PrintProduceRow(const Row& r) {
  const Scenario& s = r.scenario;
  if (!r.error.empty()) {
    std::printf("%5d %4d %4d %-8s %5d | ERROR %s\n", s.record_size, s.partitions, s.producers,
                Dur(s).c_str(), s.batch, r.error.c_str());
    return;
  }
  const ProduceFigures& p = r.produce;
  const double ratio = r.ceiling.records_per_s > 0 ? p.records_per_s / r.ceiling.records_per_s : 0;
  std::printf(
      "%5d %4d %4d %-8s %5d | %10.0f %7.1f %8.0f %8.0f %8.0f %8.0f %8.0f | %7.0f %7.0f %7.2f %7.1f "
      "| %10.0f %5.2f | %4.2f %4llu %6.0f %6.0f\n",
      s.record_size, s.partitions, s.producers, Dur(s).c_str(), s.batch, p.records_per_s,
      p.mb_per_s, Us(p.latency.Quantile(0.5)), Us(p.latency.Quantile(0.99)),
      Us(p.latency.Quantile(0.999)), p.latency.mean() / 1000.0, p.server_avg_us, p.syncs_per_s,
      p.wal_sync_avg_us, p.requests_per_commit, p.records_per_commit, r.ceiling.records_per_s,
      ratio, p.cpu_cores, static_cast<unsigned long long>(p.errors), RssNowMb(), PeakRssMb());
  if (!p.first_error.empty()) std::printf("      first produce error: %s\n", p.first_error.c_str());
  std::fflush(stdout);
}

void PrintTables(const std::vector<Row>& rows, const Settings& settings) {
  if (settings.fetch) {
    std::printf("\n== fetch (everything from offset 0; max_records %d; latency per Fetch)\n",
                settings.fetch_max_records);
    std::printf("%5s %4s %4s %-8s %5s | %9s | %10s %7s %8s %8s | %10s %7s %8s %8s | %4s\n",
                "size", "part", "prod", "dur", "batch", "records", "1c rec/s", "MB/s", "p50_us",
                "p99_us", absl::StrFormat("%dc rec/s", settings.consumers).c_str(), "MB/s",
                "p50_us", "p99_us", "errs");
    for (const Row& r : rows) {
      if (!r.error.empty()) continue;
      const Scenario& s = r.scenario;
      const FetchFigures &a = r.fetch_one, &b = r.fetch_many;
      std::printf(
          "%5d %4d %4d %-8s %5d | %9llu | %10.0f %7.1f %8.0f %8.0f | %10.0f %7.1f %8.0f %8.0f | "
          "%4llu\n",
          s.record_size, s.partitions, s.producers, Dur(s).c_str(), s.batch,
          static_cast<unsigned long long>(a.records), a.records_per_s, a.mb_per_s,
          Us(a.latency.Quantile(0.5)), Us(a.latency.Quantile(0.99)), b.records_per_s, b.mb_per_s,
          Us(b.latency.Quantile(0.5)), Us(b.latency.Quantile(0.99)),
          static_cast<unsigned long long>(a.errors + b.errors));
    }
  }
  if (settings.ceiling) {
    std::printf("\n== raw RocksDB ceiling (1 thread, one WriteBatch of `batch` records per write)\n");
    std::printf("%5s %4s %-8s %5s | %10s %7s %8s %9s %9s\n", "size", "part", "dur", "batch",
                "rec/s", "MB/s", "syncs/s", "p50_us", "p99_us");
    std::map<std::tuple<int, int, bool, int>, const CeilingFigures*> seen;
    for (const Row& r : rows) {
      const Scenario& s = r.scenario;
      if (!r.error.empty() || !seen.emplace(std::tuple(s.record_size, s.partitions, s.sync, s.batch),
                                           &r.ceiling).second) {
        continue;
      }
      const CeilingFigures& c = r.ceiling;
      std::printf("%5d %4d %-8s %5d | %10.0f %7.1f %8.0f %9.0f %9.0f\n", s.record_size,
                  s.partitions, Dur(s).c_str(), s.batch, c.records_per_s, c.mb_per_s,
                  c.syncs_per_s, Us(c.latency.Quantile(0.5)), Us(c.latency.Quantile(0.99)));
    }
  }

  std::printf("\n== targets\n");
  int max_batch = 0, max_producers = 0;
  for (const Row& r : rows) {
    max_batch = std::max(max_batch, r.scenario.batch);
    max_producers = std::max(max_producers, r.scenario.producers);
  }
  for (const Row& r : rows) {
    const Scenario& s = r.scenario;
    if (!r.error.empty() || s.sync || s.batch != max_batch || max_batch == 1 ||
        r.ceiling.records_per_s == 0) {
      continue;
    }
    const double ratio = r.produce.records_per_s / r.ceiling.records_per_s;
    std::printf("interval batch=%d size=%d part=%d prod=%d: conduit/ceiling %.2f (>= 0.60) %s\n",
                s.batch, s.record_size, s.partitions, s.producers, ratio,
                ratio >= 0.6 ? "PASS" : "FAIL");
  }
  for (const Row& one : rows) {
    const Scenario& s = one.scenario;
    if (!one.error.empty() || !s.sync || s.batch != 1 || s.producers != 1) continue;
    for (const Row& many : rows) {
      const Scenario& m = many.scenario;
      if (!many.error.empty() || !m.sync || m.batch != 1 || m.producers != max_producers ||
          m.producers == 1 || m.record_size != s.record_size || m.partitions != s.partitions) {
        continue;
      }
      const double gain = one.produce.records_per_s > 0
                              ? many.produce.records_per_s / one.produce.records_per_s
                              : 0;
      std::printf("sync batch=1 size=%d part=%d: %d producers / 1 producer = %.1fx (>= 10x) %s\n",
                  s.record_size, s.partitions, m.producers, gain, gain >= 10 ? "PASS" : "FAIL");
    }
  }
}

void PrintMachine(const std::string& base) {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
  struct statfs fs{};
  std::string fs_type = "unknown";
  if (statfs(base.c_str(), &fs) == 0) {
    fs_type = fs.f_type == 0x01021994 ? "tmpfs (fsync is free: sync figures are not meaningful)"
              : fs.f_type == 0xEF53   ? "ext2/3/4"
              : fs.f_type == 0x58465342 ? "xfs"
                                        : absl::StrFormat("0x%x", fs.f_type);
  }
  std::printf("machine: nproc %d (online %ld), cpu %s\n", usable, sysconf(_SC_NPROCESSORS_ONLN),
              cpu.c_str());
  std::printf("data dir base: %s (%s); gRPC %s, RocksDB %d.%d\n", base.c_str(), fs_type.c_str(),
              grpc::Version().c_str(), ROCKSDB_MAJOR, ROCKSDB_MINOR);
}

}  // namespace conduit::bench
