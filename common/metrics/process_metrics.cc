#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace conduit::metrics {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {std::move(metric)}};
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The system's boot time in Unix seconds (the "btime" line of /proc/stat), or 0.
double BootTime() {
  std::istringstream stat(ReadFile("/proc/stat"));
  for (std::string line; std::getline(stat, line);) {
    double seconds = 0;
    if (absl::StartsWith(line, "btime ") && absl::SimpleAtod(line.substr(6), &seconds)) {
      return seconds;
    }
  }
  return 0;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  // /proc/self/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so the
  // fields are counted from the last ')'. After it, field 3 (state) is index 0.
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    const std::vector<absl::string_view> f =
        absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
    auto field = [&](int number) {  // proc(5)'s 1-based field number
      double v = 0;
      const size_t i = static_cast<size_t>(number - 3);
      return i < f.size() && absl::SimpleAtod(f[i], &v) ? v : -1.0;
    };
    const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
    const double utime = field(14), stime = field(15), threads = field(20), start = field(22),
                 vsize = field(23), rss = field(24);
    if (utime >= 0 && stime >= 0) {
      out.push_back(Family("process_cpu_seconds_total",
                           "Total user and system CPU time spent in seconds.", MetricType::Counter,
                           (utime + stime) / ticks));
    }
    if (rss >= 0) {
      out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                           MetricType::Gauge, rss * page));
    }
    if (vsize >= 0) {
      out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                           MetricType::Gauge, vsize));
    }
    if (threads >= 0) {
      out.push_back(Family("process_threads", "Number of OS threads in the process.",
                           MetricType::Gauge, threads));
    }
    if (const double boot = BootTime(); start >= 0 && boot > 0) {
      out.push_back(Family("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, boot + start / ticks));
    }
  }
  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) {
    out.push_back(
        Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, fds));
  }
  if (rlimit limit{}; ::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.",
                         MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

std::vector<prometheus::MetricFamily> StorageCollector::Collect() const {
  namespace fs = std::filesystem;
  // store -> kind -> bytes; ordered, so a scrape lists them in a stable order.
  std::map<std::string, std::map<std::string, double>> bytes;
  std::error_code ec;
  for (auto store = fs::directory_iterator(data_dir_, ec); !ec && store != fs::directory_iterator();
       store.increment(ec)) {
    if (!store->is_directory(ec)) continue;
    auto& kinds = bytes[store->path().filename().string()];
    kinds["sst"] += 0;
    kinds["wal"] += 0;
    kinds["other"] += 0;
    std::error_code walk_ec;  // a file removed mid-walk (a compaction) is skipped
    for (auto it = fs::recursive_directory_iterator(store->path(), walk_ec);
         !walk_ec && it != fs::recursive_directory_iterator(); it.increment(walk_ec)) {
      std::error_code size_ec;
      if (!it->is_regular_file(size_ec)) continue;
      const uintmax_t size = it->file_size(size_ec);
      if (size_ec) continue;
      const std::string ext = it->path().extension().string();
      kinds[ext == ".sst" ? "sst" : ext == ".log" ? "wal" : "other"] += static_cast<double>(size);
    }
  }
  prometheus::MetricFamily family{"conduit_storage_bytes",
                                  "Bytes of the files of each store in the data directory, by "
                                  "kind: sst (table files), wal (write-ahead logs) or other",
                                  prometheus::MetricType::Gauge,
                                  {}};
  for (const auto& [store, kinds] : bytes) {
    for (const auto& [kind, size] : kinds) {
      prometheus::ClientMetric metric;
      metric.label = {{"kind", kind}, {"store", store}};
      metric.gauge.value = size;
      family.metric.push_back(std::move(metric));
    }
  }
  if (family.metric.empty()) return {};
  return {std::move(family)};
}

}  // namespace conduit::metrics
