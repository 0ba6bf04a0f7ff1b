#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace conduit::rocksdb_util {

// The reserve of free space a data volume keeps: --min_free_disk_mb, in bytes (0: none).
int64_t MinFreeDiskBytes();

// Refuses writes while the volume holding `path` has less free space than the reserve, so that
// RocksDB itself never meets ENOSPC. That matters: a WAL append that fails for space leaves
// RocksDB 7.8 unable to go on without a reopen (its WAL writer keeps the error; Debian's build
// even asserts on the next sync), while a write refused here changes nothing and can simply be
// tried again once space is freed. The reserve leaves RocksDB room to flush memtables, roll the
// WAL and run the compactions that free space after deletes.
//
// Reading the free space is a statfs syscall with a path walk: asked per record it was 16% of
// the broker's CPU under one-record produce. A reading that leaves at least twice the reserve
// free is therefore trusted for kRereadAfter; a closer one is read again at every check. Between
// two readings the volume would have to lose a whole reserve (128 MiB by default) in 50 ms for a
// write to get past the guard. Thread-safe.
class SpaceGuard {
 public:
  static constexpr absl::Duration kRereadAfter = absl::Milliseconds(50);
  // Bytes available to unprivileged writers on the volume of `path`; nullopt when unreadable.
  using FreeSpaceReader = std::function<std::optional<int64_t>(const std::string& path)>;
  static std::optional<int64_t> ReadFreeSpace(const std::string& path);

  explicit SpaceGuard(std::string path, int64_t min_free_bytes = MinFreeDiskBytes(),
                      const time::Clock* clock = time::SystemClock::Get(),
                      FreeSpaceReader read = ReadFreeSpace)
      : path_(std::move(path)),
        min_free_bytes_(min_free_bytes),
        clock_(clock),
        read_(std::move(read)) {}

  // OK, or RESOURCE_EXHAUSTED "disk full: ..." naming the free space and the reserve
  // (commit::IsDiskFull). A volume whose free space cannot be read is not refused.
  absl::Status Check() const;

 private:
  const std::string path_;
  const int64_t min_free_bytes_;
  const time::Clock* const clock_;
  const FreeSpaceReader read_;
  // Until when (Clock::Monotonic, in ns) the last reading is trusted; lock-free, as every write
  // of every thread asks.
  mutable std::atomic<int64_t> trusted_until_ns_{std::numeric_limits<int64_t>::min()};
};

}  // namespace conduit::rocksdb_util
