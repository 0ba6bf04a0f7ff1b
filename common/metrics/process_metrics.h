#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace conduit::metrics {

// The standard Prometheus process metrics, read from /proc/self on every scrape:
// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds, process_threads (the names and
// meanings of the Go and Java clients, so existing dashboards work). A file that cannot be read
// leaves its metrics out of that scrape.
class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

// Disk use of each store under a data directory, walked on every scrape:
// conduit_storage_bytes{store, kind}, one store per subdirectory (broker, coordinator, queue,
// security) and kind sst (RocksDB table files), wal (its write-ahead logs, *.log) or other
// (MANIFEST, OPTIONS, ...). What `du` would say of the files' sizes, not of their blocks.
class StorageCollector final : public prometheus::Collectable {
 public:
  explicit StorageCollector(std::string data_dir) : data_dir_(std::move(data_dir)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const std::string data_dir_;
};

}  // namespace conduit::metrics
