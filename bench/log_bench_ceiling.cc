// log_bench: the raw RocksDB WriteBatch ceiling.

#include <sys/statfs.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/write_batch.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/log_bench.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

namespace conduit::bench {

namespace lb = ::conduit::log_broker;

// The raw ceiling: the same records written by one thread straight to a fresh RocksDB (the
// broker's options, column family layout, key and record encoding), one WriteBatch of `batch`
// records per write, partitions round-robin; sync writes for `sync`, else unsynced writes with
// a background SyncWAL every flush interval. One RocksDB entry per record, as the broker stored
// records before chunks (the broker now writes one entry per chunk of a partition's records:
// services/log_broker/README.md), so this is RocksDB used key-per-record, not a bound on the
// broker.
absl::StatusOr<CeilingFigures> RunCeiling(const Scenario& s, const Settings& settings) {
  testing::TempDir dir;
  const std::string cf = lb::keys::TopicColumnFamily(lb::TopicId(1));
  CeilingFigures out;
  uint64_t records = 0, syncs = 0;
  {
    auto db = rocksdb_util::Open(dir.Sub("ceiling"), rocksdb_util::DefaultDbOptions(),
                                 rocksdb_util::DefaultCfOptions(), {cf});
    if (!db.ok()) return db.status();
    auto handle = db->Find(cf);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> background_syncs{0};
    std::thread syncer;
    if (!s.sync) {
      syncer = std::thread([&] {
        while (!stop.load()) {
          absl::SleepFor(settings.flush_interval);
          if (db->db()->SyncWAL().ok()) background_syncs.fetch_add(1);
        }
      });
    }
    lb::RecordData data;
    data.value = MakePayload(s.record_size, 42);
    std::vector<int64_t> next_offset(s.partitions, 0);
    rocksdb::WriteOptions options;
    options.sync = s.sync;
    std::string value;
    const auto window_start = SteadyClock::now() + absl::ToChronoNanoseconds(settings.warmup);
    const auto window_end = window_start + absl::ToChronoNanoseconds(settings.measure);
    uint64_t syncs_before = 0;
    bool in_window = false;
    for (int32_t partition = 0;; partition = (partition + 1) % s.partitions) {
      const auto t0 = SteadyClock::now();
      if (t0 >= window_end) break;
      if (!in_window && t0 >= window_start) {
        in_window = true;
        syncs_before = background_syncs.load();
      }
      rocksdb::WriteBatch batch;
      const absl::Time append_time = absl::Now();
      for (int i = 0; i < s.batch; ++i) {
        lb::codec::EncodeRecord(data, append_time, /*leader_epoch=*/0, &value);
        (void)batch.Put(handle.get(), lb::keys::RecordKey(partition, next_offset[partition]++),
                        value);
      }
      rocksdb::Status status = db->db()->Write(options, &batch);
      if (!status.ok()) return rocksdb_util::ToStatus(status, "ceiling write");
      const auto t1 = SteadyClock::now();
      if (in_window) {
        out.latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        records += static_cast<uint64_t>(s.batch);
        if (s.sync) ++syncs;
      }
    }
    stop.store(true);
    if (syncer.joinable()) syncer.join();
    if (!s.sync) syncs = background_syncs.load() - syncs_before;
    handle.reset();
  }
  const double secs = absl::ToDoubleSeconds(settings.measure);
  out.records_per_s = static_cast<double>(records) / secs;
  out.mb_per_s = out.records_per_s * s.record_size / 1e6;
  out.syncs_per_s = static_cast<double>(syncs) / secs;
  return out;
}

}  // namespace conduit::bench
